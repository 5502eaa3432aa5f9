import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { openDatabase, type Database } from "@/lib/db/database";
import { createTestPglite, createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { indexMissingArguments, indexMissingArgumentsAfter } from "./argument-index";
import { PrismaAuditWriter, type AuditWriterOptions } from "./audit-writer";
import { findExecutionsByArguments } from "./find-executions";

// The same statements through the database driver (as the server runs them) and through Prisma
// (as the reconciler's writer runs them, on either database).
describe.each([
  ["PostgreSQL", "the driver"],
  ["PostgreSQL", "Prisma"],
  ["PGlite", "the driver"],
  ["PGlite", "Prisma"],
] as const)("audit writer on %s, statements through %s", (database, through) => {
  let pg: { db: Database; drop: () => Promise<void> };
  beforeAll(async () => {
    pg = database === "PostgreSQL" ? await createTestPostgres("audit_writer") : await createTestPglite();
  });
  afterAll(() => pg?.drop());
  const newWriter = (options: AuditWriterOptions) =>
    new PrismaAuditWriter(pg.db.prisma, { ...(through === "the driver" ? { execute: pg.db.execute, query: pg.db.query } : {}), ...options });

  const intent = (key: string, startedAt = new Date()) => ({
    id: randomUUID(), scope: "s", key, tool: "t", fingerprint: "f", token: 7, session: "x", caller: null, fallback: false,
    startedAt, leaseUntil: new Date(startedAt.getTime() + 60_000),
  });
  const outcome = (id: string) => ({
    id, outcome: "succeeded" as const, finishedAt: new Date(), durationMs: 3, resultStatus: 201, resultBody: '{"ok":1}', resultFinal: false,
    expiresAt: new Date(Date.now() + 60_000), error: null,
  });

  it("in async mode writes an intent and its outcome as one row, and answers lookups before it is written", async () => {
    const writer = newWriter({ mode: "async", flushIntervalMs: 60_000 });
    const i = intent("a");
    await writer.intent(i);
    expect(await writer.priorExecution("s", "a", new Date(0))).toMatchObject({ id: i.id, outcome: null });
    writer.outcome(outcome(i.id));
    expect(await writer.priorExecution("s", "a", new Date(0))).toMatchObject({ id: i.id, outcome: "succeeded", resultBody: '{"ok":1}' });
    expect(await pg.db.prisma.execution.count({ where: { key: "a" } })).toBe(0);
    writer.suppression({ id: randomUUID(), scope: "s", key: "a", tool: "t", kind: "replay", fallback: false, gapMs: 12, session: "y", caller: null, originalSession: "x", originalExecutionId: i.id, at: new Date() });
    await writer.close();
    const row = await pg.db.prisma.execution.findUnique({ where: { id: i.id } });
    expect(row).toMatchObject({ outcome: "succeeded", resultStatus: 201, resultBody: '{"ok":1}', token: 7n, session: "x" });
    expect(await pg.db.prisma.suppression.findFirst({ where: { key: "a" } })).toMatchObject({ kind: "replay", gapMs: 12, originalExecutionId: i.id });
  });

  it("in durable mode writes the intent at once and the outcome in a batch; a second open execution of a key is refused", async () => {
    const writer = newWriter({ mode: "durable", flushIntervalMs: 60_000 });
    const i = intent("b");
    await writer.intent(i);
    expect(await pg.db.prisma.execution.findUnique({ where: { id: i.id } })).toMatchObject({ outcome: null });
    await expect(writer.intent(intent("b"))).rejects.toThrow(/has not finished/);
    writer.outcome({ ...outcome(i.id), outcome: "failed", resultStatus: null, resultBody: null, resultFinal: null, expiresAt: null });
    // a queued outcome saying nothing ran frees the key: the second intent writes the queue first and goes in
    await writer.intent(intent("b"));
    await writer.close();
    expect(await pg.db.prisma.execution.count({ where: { key: "b" } })).toBe(2);
    expect(await pg.db.prisma.execution.findUnique({ where: { id: i.id } })).toMatchObject({ outcome: "failed" });
  });

  it("refuses an intent whose key's open execution turns out, once its queued outcome is written, to have run", async () => {
    // A key store that lost a running call's reservation lets a retry reserve the key; that retry can
    // read the log before the first call's intent commits and reach its own intent after the first
    // call's result was queued. Writing it then would run the action a second time.
    for (const ran of ["succeeded", "final_error", "unknown"] as const) {
      const writer = newWriter({ mode: "durable", flushIntervalMs: 60_000 });
      const first = intent(`ran-${ran}`);
      await writer.intent(first);
      writer.outcome({ ...outcome(first.id), outcome: ran });
      await expect(writer.intent(intent(`ran-${ran}`))).rejects.toMatchObject({ code: "open_execution" });
      await writer.close();
      expect(await pg.db.prisma.execution.findMany({ where: { key: `ran-${ran}` }, select: { id: true, outcome: true } })).toEqual([{ id: first.id, outcome: ran }]);
    }
  });

  it("records how each call came in (http by default, mcp when said), in both modes", async () => {
    for (const mode of ["durable", "async"] as const) {
      const writer = newWriter({ mode, flushIntervalMs: 60_000 });
      const viaMcp = { ...intent(`t-${mode}-mcp`), transport: "mcp" as const };
      const viaHttp = intent(`t-${mode}-http`);
      await writer.intent(viaMcp);
      await writer.intent(viaHttp);
      writer.suppression({ id: randomUUID(), scope: "s", key: viaMcp.key, tool: "t", kind: "replay", fallback: false, gapMs: 1, session: null, caller: null, transport: "mcp", originalSession: null, originalExecutionId: viaMcp.id, at: new Date() });
      await writer.close();
      expect(await pg.db.prisma.execution.findUnique({ where: { id: viaMcp.id } })).toMatchObject({ transport: "mcp" });
      expect(await pg.db.prisma.execution.findUnique({ where: { id: viaHttp.id } })).toMatchObject({ transport: "http" });
      expect(await pg.db.prisma.suppression.findFirst({ where: { key: viaMcp.key } })).toMatchObject({ transport: "mcp" });
    }
  });

  it("keeps a call's kept arguments on its execution, and an unknown outcome's answer, in both modes and every way rows go in", async () => {
    const args = (n: number) => ({ arguments: JSON.stringify({ customerId: `cus_${n}`, card: "[redacted]" }), argumentsKept: "redacted" as const });
    const unknownOutcome = (id: string) => ({ ...outcome(id), outcome: "unknown" as const, resultStatus: null, resultBody: null, resultFinal: null, expiresAt: null, error: "the service answered 503", answerStatus: 503, answerBody: '{"chargeId":"ch_9"}' });
    for (const mode of ["durable", "async"] as const) {
      const writer = newWriter({ mode, flushIntervalMs: 60_000 });
      const lone = { ...intent(`args-${mode}-lone`), ...args(1) };
      await writer.intent(lone);
      // concurrent intents: one statement for the group (durable), one batch (async)
      const group = [2, 3, 4].map((n) => ({ ...intent(`args-${mode}-${n}`), ...args(n) }));
      await Promise.all(group.map((g) => writer.intent(g)));
      const none = { ...intent(`args-${mode}-none`), arguments: null, argumentsKept: null };
      await writer.intent(none);
      writer.outcome(unknownOutcome(lone.id));
      writer.outcome(outcome(group[0].id));
      await writer.close();
      for (const [i, n] of [[lone, 1], ...group.map((g, j) => [g, j + 2] as const)] as const) {
        expect(await pg.db.prisma.execution.findUnique({ where: { id: i.id } }), `${mode} ${n}`).toMatchObject({ arguments: { customerId: `cus_${n}`, card: "[redacted]" }, argumentsKept: "redacted" });
      }
      expect(await pg.db.prisma.execution.findUnique({ where: { id: none.id } })).toMatchObject({ arguments: null, argumentsKept: null });
      expect(await pg.db.prisma.execution.findUnique({ where: { id: lone.id } })).toMatchObject({ outcome: "unknown", answerStatus: 503, answerBody: '{"chargeId":"ch_9"}' });
      expect(await pg.db.prisma.execution.findUnique({ where: { id: group[0].id } })).toMatchObject({ outcome: "succeeded", answerStatus: null, arguments: { customerId: "cus_2" } });
    }
  });

  it("keeps every column as given, times to the millisecond, whichever way a row goes in", async () => {
    await expectColumnsKept(pg.db, newWriter);
  });

  it("makes a call findable by its kept arguments one batch after its intent, not in the intent's commit, in both modes", async () => {
    const find = async (value: string) =>
      (await findExecutionsByArguments(pg.db, [JSON.stringify({ customerId: value })], "s", 50)).found.map((f) => f.id);
    for (const mode of ["durable", "async"] as const) {
      const writer = newWriter({ mode, flushIntervalMs: 60_000 });
      const lone = { ...intent(`find-${mode}-lone`), arguments: JSON.stringify({ customerId: `cus_find_${mode}` }), argumentsKept: "full" as const };
      const group = [1, 2].map((n) => ({ ...intent(`find-${mode}-${n}`), arguments: JSON.stringify({ customerId: `cus_find_${mode}` }), argumentsKept: "full" as const }));
      await writer.intent(lone);
      await Promise.all(group.map((g) => writer.intent(g)));
      if (mode === "durable") {
        // committed, and not yet findable: the copy the search reads waits for the writer's next batch
        expect(await pg.db.prisma.execution.count({ where: { id: { in: [lone.id, ...group.map((g) => g.id)] } } })).toBe(3);
        expect(await find(`cus_find_${mode}`)).toEqual([]);
      }
      await writer.close();
      expect((await find(`cus_find_${mode}`)).sort()).toEqual([lone.id, ...group.map((g) => g.id)].sort());
      expect(await find("cus_nobody")).toEqual([]);
    }
  });

  it("after a crash between an intent and its searchable copy, finds the call again from the log: at start, and by the reconciler's scan", async () => {
    for (const recovery of ["start", "reconciler"] as const) {
      for (const mode of ["durable", "async"] as const) {
        const value = `cus_crash_${recovery}_${mode}`;
        // the process stops after the intents' commit (durable) or their batch (async), before the
        // copies go out: their statement never reaches the database
        const real = newWriter({}) as unknown as { execute: NonNullable<AuditWriterOptions["execute"]> };
        const writer = newWriter({
          mode,
          flushIntervalMs: 1e9,
          onError: () => {},
          execute: (sql, params, options) => (options?.prepare === "idemgate_audit_argument_index" ? Promise.reject(new Error("stopped")) : real.execute(sql, params, options)),
        });
        const calls = [1, 2].map((n) => ({ ...intent(`crash-${recovery}-${mode}-${n}`), arguments: JSON.stringify({ customerId: value, n }), argumentsKept: "full" as const }));
        for (const c of calls) await writer.intent(c);
        // the batch goes in; flush() then fails on the copies, as the process would have stopped
        if (mode === "async") await expect(writer.flush()).rejects.toThrow("stopped");
        expect(await pg.db.prisma.execution.count({ where: { id: { in: calls.map((c) => c.id) } } })).toBe(2);
        const find = async () => (await findExecutionsByArguments(pg.db, [JSON.stringify([value])], undefined, 50, "top-level values")).found.map((f) => f.id).sort();
        expect(await find()).toEqual([]);
        if (recovery === "start") {
          expect(await indexMissingArguments(pg.db.prisma)).toBe(2);
        } else {
          // from a position before these calls, as the reconciler's cursor stands
          const scanned = await indexMissingArgumentsAfter(pg.db.prisma, { at: new Date(Date.now() - 60_000), id: "" }, 1_000);
          expect(scanned.indexed).toBe(2);
          expect(scanned.last).not.toBeNull();
        }
        expect(await find()).toEqual(calls.map((c) => c.id).sort());
        // written once: a second pass finds nothing missing
        expect(await indexMissingArguments(pg.db.prisma)).toBe(0);
      }
    }
  });

  it("in async mode never writes an outcome before its intent: one queued ahead of its intent's batch waits for that batch", async () => {
    // batches of two: the first is written as soon as two intents are queued, the rest wait for it
    const writer = newWriter({ mode: "async", flushIntervalMs: 60_000, maxBatch: 2 });
    const intents = [1, 2, 3, 4, 5].map((n) => intent(`order-${n}`));
    await Promise.all(intents.map((i) => writer.intent(i)));
    // the newest execution ends first: its intent is two batches away when its outcome is queued
    for (const n of [4, 2, 0]) writer.outcome(outcome(intents[n].id));
    await writer.close();
    const rows = await pg.db.prisma.execution.findMany({ where: { id: { in: intents.map((i) => i.id) } } });
    const byId = new Map(rows.map((r) => [r.id, r.outcome]));
    expect(intents.map((i) => byId.get(i.id))).toEqual(["succeeded", null, "succeeded", null, "succeeded"]);
  });

  it("in async mode inserts the next execution of a key in the batch that finishes the one before", async () => {
    const writer = newWriter({ mode: "async", flushIntervalMs: 60_000 });
    const first = intent("next");
    await writer.intent(first);
    await writer.flush();
    // one batch: the first execution's outcome, and the next execution of the same key
    writer.outcome({ ...outcome(first.id), outcome: "failed", resultStatus: null, resultBody: null, resultFinal: null, expiresAt: null });
    const second = intent("next");
    await writer.intent(second);
    writer.outcome(outcome(second.id));
    await writer.close();
    const rows = await pg.db.prisma.execution.findMany({ where: { key: "next" }, orderBy: { startedAt: "asc" } });
    expect(rows.map((r) => [r.id, r.outcome])).toEqual([
      [first.id, "failed"],
      [second.id, "succeeded"],
    ]);
  });

  it("in async mode records an operator's decision on an execution whose intent is still queued", async () => {
    const writer = newWriter({ mode: "async", flushIntervalMs: 60_000 });
    const i = intent("decided");
    await writer.intent(i);
    expect(await writer.closeOpenExecution(i.id, "released", "it did not happen")).toBe(true);
    expect(await pg.db.prisma.execution.findUnique({ where: { id: i.id } })).toMatchObject({ outcome: "released" });
    // the call's result arriving afterwards is a late completion, as when the intent was written at once
    writer.outcome({ ...outcome(i.id), error: "completion not stored: the reservation was released" });
    await writer.close();
    expect(await pg.db.prisma.execution.findUnique({ where: { id: i.id } })).toMatchObject({ outcome: "late_completion", resultBody: '{"ok":1}' });
  });

  it("an operator's decision stands over the call's own outcome still queued: lookups answer as the log will hold it", async () => {
    for (const mode of ["async", "durable"] as const) {
      const writer = newWriter({ mode, flushIntervalMs: 60_000 });
      // the call ended unknown (queued), then the operator released the key
      const i = intent(`decided-over-unknown-${mode}`);
      await writer.intent(i);
      writer.outcome({ ...outcome(i.id), outcome: "unknown", resultStatus: null, resultBody: null, expiresAt: null, error: "socket hang up" });
      expect(await writer.closeOpenExecution(i.id, "released", "the tool says it did not happen")).toBe(true);
      expect(await writer.priorExecution("s", i.key, new Date(0))).toMatchObject({ id: i.id, outcome: "released" });
      // a result arriving after the release is a late completion, before and after it is written
      const j = intent(`decided-then-completed-${mode}`);
      await writer.intent(j);
      expect(await writer.closeOpenExecution(j.id, "released", "it did not happen")).toBe(true);
      writer.outcome(outcome(j.id));
      expect(await writer.priorExecution("s", j.key, new Date(0))).toMatchObject({ id: j.id, outcome: "late_completion", resultBody: '{"ok":1}' });
      await writer.close();
      expect(await writer.priorExecution("s", i.key, new Date(0))).toMatchObject({ outcome: "released" });
      expect(await writer.priorExecution("s", j.key, new Date(0))).toMatchObject({ outcome: "late_completion", resultBody: '{"ok":1}' });
    }
  });

  it("close() writes every queued row, and rows reported after it are written at once", async () => {
    for (const mode of ["async", "durable"] as const) {
      const writer = newWriter({ mode, flushIntervalMs: 60_000, maxBatch: 3 });
      const intents = Array.from({ length: 7 }, (_, n) => intent(`close-${mode}-${n}`));
      for (const i of intents) await writer.intent(i);
      for (const i of intents) writer.outcome(outcome(i.id));
      for (const i of intents) {
        writer.suppression({ id: randomUUID(), scope: "s", key: i.key, tool: "t", kind: "replay", fallback: false, gapMs: 1, session: null, caller: null, originalSession: null, originalExecutionId: i.id, at: new Date() });
      }
      expect(writer.pending).toBeGreaterThan(0);
      await writer.close();
      expect(writer.pending).toBe(0);
      const keys = intents.map((i) => i.key);
      expect(await pg.db.prisma.execution.count({ where: { key: { in: keys }, outcome: "succeeded" } })).toBe(7);
      expect(await pg.db.prisma.suppression.count({ where: { key: { in: keys } } })).toBe(7);

      // a call that ends after the writer closed: its intent goes in at once, its outcome right after
      const late = intent(`close-${mode}-late`);
      await writer.intent(late);
      expect(await pg.db.prisma.execution.findUnique({ where: { id: late.id } })).toMatchObject({ outcome: null });
      writer.outcome(outcome(late.id));
      await vi.waitFor(async () => expect(await pg.db.prisma.execution.findUnique({ where: { id: late.id } })).toMatchObject({ outcome: "succeeded" }));
    }
  });
});

/**
 * Writes rows every way they go in (a lone intent, a group of intents in one statement, a batch's
 * new execution with and without its outcome, an outcome updating a row written before, a
 * suppression) with a value in every column, and reads them back through Prisma.
 */
async function expectColumnsKept(db: Database, newWriter: (options: AuditWriterOptions) => PrismaAuditWriter): Promise<void> {
  const tag = randomUUID().slice(0, 8);
  // odd milliseconds, long before and after the epoch's 32-bit seconds, and one at 0 ms
  const times = [Date.UTC(2026, 11, 6, 13, 1, 2, 345), Date.UTC(1999, 0, 1, 0, 0, 0, 1), Date.UTC(2100, 5, 30, 23, 59, 59, 999), Date.UTC(2026, 0, 1)];
  const intentAt = (n: number, key: string) => ({
    id: randomUUID(), scope: `cols-${tag}`, key, tool: `tool-${n}`, fingerprint: `fp-${n}`, token: 1_733_480_000_000 + n, session: `session-${n}`, caller: `caller-${n}`,
    transport: n % 2 ? ("mcp" as const) : ("http" as const), fallback: n % 2 === 0, startedAt: new Date(times[n % 4]), leaseUntil: new Date(times[n % 4] + 61_001),
    arguments: JSON.stringify({ n, text: 'quotes " and \\ and ünïcode ✓' }), argumentsKept: "full" as const,
  });
  const outcomeOf = (id: string, n: number) => ({
    id, outcome: "final_error" as const, finishedAt: new Date(times[(n + 1) % 4] + 7), durationMs: 1_000 + n, resultStatus: 402, resultBody: `{"declined":${n}}`, resultFinal: true,
    expiresAt: new Date(times[(n + 2) % 4] + 86_400_123), error: `error "${n}"`, answerStatus: 500 + n, answerBody: `answer ${n}`,
  });
  const expected: { intent: ReturnType<typeof intentAt>; outcome: ReturnType<typeof outcomeOf> | null }[] = [];
  for (const mode of ["durable", "async"] as const) {
    const writer = newWriter({ mode, flushIntervalMs: 60_000 });
    const lone = intentAt(0, `${mode}-lone`);
    await writer.intent(lone);
    const group = [1, 2, 3].map((n) => intentAt(n, `${mode}-group-${n}`));
    await Promise.all(group.map((g) => writer.intent(g)));
    // written before its outcome (an update), and with it (async: one row)
    await writer.flush();
    writer.outcome(outcomeOf(lone.id, 0));
    const open = intentAt(4, `${mode}-open`);
    await writer.intent(open);
    const finished = intentAt(5, `${mode}-finished`);
    await writer.intent(finished);
    writer.outcome(outcomeOf(finished.id, 5));
    writer.suppression({
      id: randomUUID(), scope: `cols-${tag}`, key: lone.key, tool: "tool-0", kind: "mismatch", fallback: true, gapMs: 12_345, session: "dup-session", caller: "dup-caller",
      transport: "mcp", originalSession: "session-0", originalExecutionId: lone.id, at: new Date(times[0] + 999),
    });
    await writer.close();
    expected.push({ intent: lone, outcome: outcomeOf(lone.id, 0) }, ...group.map((intent) => ({ intent, outcome: null })), { intent: open, outcome: null }, { intent: finished, outcome: outcomeOf(finished.id, 5) });
  }
  for (const { intent: i, outcome: o } of expected) {
    const row = await db.prisma.execution.findUnique({ where: { id: i.id } });
    expect(row, i.key).toEqual(
      expect.objectContaining({
        scope: i.scope, key: i.key, tool: i.tool, fingerprint: i.fingerprint, token: BigInt(i.token), session: i.session, caller: i.caller, transport: i.transport, fallback: i.fallback,
        startedAt: i.startedAt, leaseUntil: i.leaseUntil, arguments: JSON.parse(i.arguments), argumentsKept: "full",
        outcome: o?.outcome ?? null, finishedAt: o?.finishedAt ?? null, durationMs: o?.durationMs ?? null, resultStatus: o?.resultStatus ?? null, resultBody: o?.resultBody ?? null,
        resultFinal: o?.resultFinal ?? null, expiresAt: o?.expiresAt ?? null, error: o?.error ?? null, answerStatus: o?.answerStatus ?? null, answerBody: o?.answerBody ?? null,
      }),
    );
  }
  const suppressions = await db.prisma.suppression.findMany({ where: { scope: `cols-${tag}` } });
  expect(suppressions).toHaveLength(2);
  for (const s of suppressions) {
    expect(s).toMatchObject({
      tool: "tool-0", kind: "mismatch", fallback: true, gapMs: 12_345, session: "dup-session", caller: "dup-caller", transport: "mcp", originalSession: "session-0", at: new Date(times[0] + 999),
    });
  }
}

describe("audit writer bound, on PostgreSQL", () => {
  let server: TestPostgres;
  let locker: pg.Client;
  beforeAll(async () => {
    server = await createTestPostgres("audit_bound");
    locker = new pg.Client({ connectionString: server.url });
    await locker.connect();
  });
  afterAll(async () => {
    await locker?.end();
    await server?.drop();
  });

  it("holds at most maxQueued rows while the database does not take them: intents wait, extra suppressions are dropped, nothing else is lost", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const errors: unknown[] = [];
    const writer = new PrismaAuditWriter(server.db.prisma, {
      mode: "async", execute: server.db.execute, flushIntervalMs: 5, maxBatch: 20, maxQueued: 50, onError: (e) => errors.push(e),
    });
    const at = new Date();
    const intents = Array.from({ length: 200 }, (_, n) => ({
      id: randomUUID(), scope: "burst", key: `k-${n}`, tool: "t", fingerprint: "f", token: 1, session: null, caller: null, fallback: false,
      startedAt: at, leaseUntil: new Date(at.getTime() + 60_000),
    }));
    // the database stops taking rows: the writer's batches wait on the lock
    await locker.query("BEGIN");
    await locker.query("LOCK TABLE executions, suppressions IN EXCLUSIVE MODE");
    let accepted = 0;
    let maxPending = 0;
    const calls = intents.map((i) => {
      const call = writer.intent(i).then(() => {
        accepted++;
        maxPending = Math.max(maxPending, writer.pending);
      });
      maxPending = Math.max(maxPending, writer.pending);
      return call;
    });
    for (const i of intents.slice(0, 100)) {
      writer.suppression({ id: randomUUID(), scope: "burst", key: i.key, tool: "t", kind: "replay", fallback: false, gapMs: 1, session: null, caller: null, originalSession: null, originalExecutionId: i.id, at });
      maxPending = Math.max(maxPending, writer.pending);
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(writer.pending).toBe(50);
    expect(accepted).toBe(50); // the other 150 callers wait for room
    expect(writer.droppedSuppressions).toBe(100);

    await locker.query("COMMIT");
    await Promise.all(calls);
    for (const i of intents) writer.outcome({ id: i.id, outcome: "succeeded", finishedAt: new Date(), durationMs: 1, resultStatus: 200, resultBody: "{}", resultFinal: false, expiresAt: null, error: null });
    await writer.close();
    expect(maxPending).toBeLessThanOrEqual(50);
    expect(accepted).toBe(200);
    expect(await server.db.prisma.execution.count({ where: { scope: "burst", outcome: "succeeded" } })).toBe(200);
    expect(errors).toEqual([]);
    expect(warn).toHaveBeenCalled();
    warn.mockRestore();
  });

  it("an intent waiting for room fails when the batch cannot be written, as a durable intent would", async () => {
    const errors: unknown[] = [];
    const writer = new PrismaAuditWriter(server.db.prisma, {
      mode: "async", execute: server.db.execute, flushIntervalMs: 60_000, maxBatch: 5, maxQueued: 5, onError: (e) => errors.push(e),
    });
    const at = new Date();
    const make = (n: number) => ({
      id: randomUUID(), scope: "refused", key: `k-${n}`, tool: "t", fingerprint: "f", token: 1, session: null, caller: null, fallback: false,
      startedAt: at, leaseUntil: new Date(at.getTime() + 60_000),
    });
    // the database refuses the batches
    await locker.query("ALTER TABLE executions RENAME TO executions_away");
    try {
      for (let n = 0; n < 5; n++) await writer.intent(make(n));
      await expect(writer.intent(make(5))).rejects.toThrow(/executions/);
      expect(writer.pending).toBe(5);
    } finally {
      await locker.query("ALTER TABLE executions_away RENAME TO executions");
    }
    expect(errors.length).toBeGreaterThan(0);
    await writer.close();
    expect(await server.db.prisma.execution.count({ where: { scope: "refused" } })).toBe(5);
  });
});

describe("audit writer statements on a PostgreSQL server", () => {
  let server: TestPostgres;
  let one: Database;
  beforeAll(async () => {
    server = await createTestPostgres("audit_prepared");
    // one pooled connection, so what it has prepared can be asked of it
    one = await openDatabase({ url: server.url, poolSize: 1, migrate: false });
  });
  afterAll(async () => {
    await one?.close();
    await server?.drop();
  });

  it("keeps every column as given, times to the millisecond, through a session whose TimeZone is not UTC", async () => {
    // +12:45 (+13:45 in summer): any time converted with the session's zone would be off by hours
    const client = new pg.Client({ connectionString: server.url });
    await client.connect();
    try {
      await client.query("SET TIME ZONE 'Pacific/Chatham'");
      const execute = async (sql: string, params: readonly unknown[]) => (await client.query(sql, params as unknown[])).rowCount ?? 0;
      await expectColumnsKept(server.db, (options) => new PrismaAuditWriter(server.db.prisma, { ...options, execute }));
    } finally {
      await client.end();
    }
  });

  it("keeps the intent, the batch, the arguments' copies and the latest-execution lookup prepared on the connection: parsed and planned once, not per call", async () => {
    const writer = new PrismaAuditWriter(one.prisma, { mode: "durable", execute: one.execute, query: one.query, flushIntervalMs: 60_000 });
    const startedAt = new Date();
    const intent = (key: string) => ({
      id: randomUUID(), scope: "prep", key, tool: "t", fingerprint: "f", token: 1, session: null, caller: null, fallback: false,
      startedAt, leaseUntil: new Date(startedAt.getTime() + 60_000), arguments: JSON.stringify({ customerId: `cus_${key}` }), argumentsKept: "full" as const,
    });
    const first = intent("a");
    const second = intent("b");
    await writer.intent(first);
    await writer.intent(second);
    writer.outcome({ id: first.id, outcome: "succeeded", finishedAt: new Date(), durationMs: 1, resultStatus: 200, resultBody: "{}", resultFinal: false, expiresAt: new Date(Date.now() + 60_000), error: null });
    await writer.flush();
    expect(await writer.priorExecution("prep", "a", new Date(0))).toMatchObject({ id: first.id, outcome: "succeeded" });
    const prepared = (await one.query("SELECT name FROM pg_prepared_statements ORDER BY name", [])).map((r) => r.name);
    // with the statement writing the search's copies of the kept arguments (flush() writes them)
    expect(prepared).toEqual(["idemgate_audit_argument_index", "idemgate_audit_batch", "idemgate_audit_intent", "idemgate_audit_latest_execution"]);
    // the second intent went through the prepared statement, with its arguments kept
    const rows = await one.query("SELECT key, arguments FROM executions WHERE scope = 'prep' ORDER BY key", []);
    expect(rows).toEqual([
      { key: "a", arguments: { customerId: "cus_a" } },
      { key: "b", arguments: { customerId: "cus_b" } },
    ]);
    await writer.close();
  });
});
