import { randomUUID } from "node:crypto";
import { PrismaPg } from "@prisma/adapter-pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaClient } from "@/generated/prisma/client";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { reconcile } from "@/lib/anomalies/reconcile";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";
import { Engine } from "./engine";
import { InvalidKeyError, UnavailableError } from "./errors";
import { PASS_THROUGH_PREFIX, validateKey } from "./key-rules";
import { NotRunError, OutcomeUnknown, type RunTool, type ToolPolicy } from "./tool";

// Pass through but record: a tool that is idempotent by its own word (an MCP server's
// idempotentHint) runs without a key, every time it is called, and each call is an execution in the
// audit log under a key of its own, with its caller and transport. The audit log is real
// (PostgreSQL); the key store is never touched.

const setFlag: ToolPolicy = {
  name: "files.set_flag",
  kind: "read",
  audited: true,
  ttlMs: 60_000,
  leaseMs: 5_000,
  stuckPolicy: "block",
  fallbackTtlMs: null,
  dedupes: false,
};

describe("pass-through calls", () => {
  let t: StoreUnderTest;
  let audit: PrismaAuditWriter;
  let engine: Engine;
  const scope = () => `s${randomUUID().slice(0, 8)}`;
  const executions = (s: string) => t.db.prisma.execution.findMany({ where: { scope: s }, orderBy: { startedAt: "asc" } });

  beforeAll(async () => {
    t = await openTestStore("postgres");
    audit = new PrismaAuditWriter(t.db.prisma, { mode: "durable", flushIntervalMs: 5 });
    engine = new Engine({ store: t.store, audit });
  });
  afterAll(async () => {
    await audit?.close();
    await t?.cleanup();
  });

  it("runs every call without a key and records each one, with its caller, session and transport", async () => {
    let runs = 0;
    const run: RunTool = async (_args, ctx) => {
      runs++;
      expect(ctx.key).toBeNull();
      return { body: { set: true, executionId: ctx.executionId } };
    };
    const s = scope();
    const request = { scope: s, args: { name: "beta", value: true }, caller: "tok_1", session: "run-7", transport: "mcp" as const };
    const first = await engine.invoke(setFlag, run, request);
    const second = await engine.invoke(setFlag, run, request);
    expect(runs).toBe(2);
    expect(first).toMatchObject({ kind: "read", status: 200, executionId: expect.any(String) });
    expect(JSON.parse(first.body)).toEqual({ set: true, executionId: (first as { executionId: string }).executionId });
    await audit.flush();

    const rows = await executions(s);
    expect(rows.map((r) => r.id).sort()).toEqual([(first as { executionId: string }).executionId, (second as { executionId: string }).executionId].sort());
    for (const row of rows) {
      expect(row).toMatchObject({ tool: "files.set_flag", key: `${PASS_THROUGH_PREFIX}${row.id}`, transport: "mcp", caller: "tok_1", session: "run-7", outcome: "succeeded", resultStatus: 200, resultBody: null, expiresAt: null });
      expect(row.durationMs).not.toBeNull();
    }
    // nothing was reserved
    expect((await t.store.list({ scope: s, limit: 10, nowMs: Date.now() })).items).toEqual([]);
  });

  it("records how a call failed, keeps a server's error text for operators, and hands the caller the tool's error", async () => {
    const s = scope();
    const unknown = new OutcomeUnknown("the call to the MCP server files failed", false, "HTTP 500: pool exhausted at db.internal:5432");
    const thrown = await engine.invoke(setFlag, async () => Promise.reject(unknown), { scope: s, args: { n: 1 } }).catch((e) => e);
    expect(thrown).toBe(unknown);
    const refused = new NotRunError("the MCP server files is not connected; nothing was sent");
    expect(await engine.invoke(setFlag, async () => Promise.reject(refused), { scope: s, args: { n: 2 } }).catch((e) => e)).toBe(refused);
    await audit.flush();

    const rows = await executions(s);
    expect(rows.map((r) => [r.outcome, r.error])).toEqual([
      ["unknown", expect.stringContaining("db.internal:5432")],
      ["failed", "the MCP server files is not connected; nothing was sent"],
    ]);
    expect(rows.every((r) => r.transport === "http")).toBe(true);
  });

  it("is not an anomaly: repeats and failures of pass-through calls are not flagged by the reconciler", async () => {
    const s = scope();
    const args = { name: "gamma", value: false };
    for (let i = 0; i < 3; i++) await engine.invoke(setFlag, async () => ({ body: { ok: true } }), { scope: s, args });
    await engine.invoke(setFlag, async () => Promise.reject(new OutcomeUnknown("no answer within 10 ms", true)), { scope: s, args }).catch(() => {});
    await audit.flush();
    expect(await executions(s)).toHaveLength(4);

    await reconcile({ prisma: t.db.prisma, store: t.store });
    const flagged = await t.db.prisma.anomaly.findMany({ where: { scope: s } });
    expect(flagged).toEqual([]);
  });

  it("never takes a caller's key: the prefix is reserved", () => {
    expect(() => validateKey(`${PASS_THROUGH_PREFIX}mine`)).toThrow(InvalidKeyError);
  });

  it("runs nothing when its call cannot be recorded", async () => {
    const unreachable = new PrismaClient({ adapter: new PrismaPg({ connectionString: "postgresql://postgres@127.0.0.1:1/none", connectionTimeoutMillis: 300 }) });
    let runs = 0;
    const err = await new Engine({ store: t.store, audit: new PrismaAuditWriter(unreachable) })
      .invoke(setFlag, async () => ({ body: { n: ++runs } }), { scope: scope(), args: {} })
      .catch((e) => e);
    expect(err).toBeInstanceOf(UnavailableError);
    expect((err as UnavailableError).component).toBe("audit_log");
    expect(runs).toBe(0);
    await unreachable.$disconnect();
  });
});
