import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reconcile } from "@/lib/anomalies/reconcile";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { isIdemgateError, OutcomeUnknownError } from "@/lib/idempotency/errors";
import { PausedTools, type ToolPause } from "@/lib/idempotency/paused-tools";
import { probeKey } from "@/lib/operator/probe-key";
import { reconcileDeps } from "@/lib/process/background";
import { parseToolConfig } from "@/lib/tools/config-file";
import { ToolRegistry } from "@/lib/tools/registry";
import { derivedKey } from "@/lib/tools/upstream";
import { IdempotentProvider, STRIPE } from "@/test/support/idempotent-provider";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";

// A paused tool whose probe is a resend (`probe: resend`): its held keys are not sent upstream again
// while it is paused — neither by the reconciler's pass nor by an operator's "Ask the tool" (503
// tool_paused) — and are once it is resumed. Against a real audit database and key store and a
// local service that deduplicates as Stripe documents.

const CONFIG = `
tools:
  - name: stripe.create_payment_intent
    description: Create a PaymentIntent
    leaseMs: 5000
    upstream: { preset: stripe, url: "\${STRIPE}/v1/payment_intents", timeoutMs: 400 }
`;
const TOOL = "stripe.create_payment_intent";

describe("a paused tool's resend probes", () => {
  const provider = new IdempotentProvider(STRIPE);
  let under: StoreUnderTest;
  let audit: PrismaAuditWriter;
  let engine: Engine;
  let registry: ToolRegistry;
  let pauses: ToolPause[] = [];
  const pausedTools = new PausedTools(async () => pauses);
  const runtime = () => ({ db: under.db, store: under.store, engine, registry });
  const pass = () => reconcile(reconcileDeps(runtime()), { nowMs: Date.now(), settleMs: 0, effectGraceMs: 0 });

  beforeAll(async () => {
    registry = new ToolRegistry(parseToolConfig(CONFIG, "idemgate.config.yaml", { STRIPE: await provider.start() }).tools);
    under = await openTestStore("postgres");
    audit = new PrismaAuditWriter(under.db.prisma, { flushIntervalMs: 5 });
    engine = new Engine({ store: under.store, audit, pausedTools });
  }, 60_000);
  afterAll(async () => {
    await audit?.close();
    await under?.cleanup();
    await provider.stop();
  });

  it("an unknown key is not resent while its tool is paused, by a reconciler pass or an operator; it is once resumed", async () => {
    const scope = `paused-resend-${randomUUID().slice(0, 8)}`;
    const tool = registry.get(TOOL);
    provider.next("lose_answer");
    await expect(engine.invoke(tool, registry.runnerFor(tool, under.db.prisma), { scope, key: "k", args: registry.parseArgs(tool, { amount: 2000, currency: "eur" }) })).rejects.toBeInstanceOf(
      OutcomeUnknownError,
    );
    await audit.flush();
    expect((await under.store.get(scope, "k"))?.status).toBe("unknown");
    const sent = () => provider.received.filter((r) => r.key === derivedKey(scope, "k")).length;
    expect(sent()).toBe(1);

    pauses = [{ tool: TOOL, reason: "the provider double-charges", actor: "ops@example.com", pausedAtMs: Date.now(), source: "operator" }];
    await pausedTools.refresh();
    const report = await pass();
    expect(report.probed).toEqual([]);
    const asked = await probeKey(runtime(), { scope, key: "k", actor: "ops@example.com" }).catch((err: unknown) => err);
    expect(isIdemgateError(asked, "tool_paused")).toBe(true);
    expect(sent()).toBe(1);
    expect((await under.store.get(scope, "k"))?.status).toBe("unknown");
    expect(await under.db.prisma.operatorAction.count({ where: { scope, key: "k" } })).toBe(0);

    pauses = [];
    await pausedTools.refresh();
    const resumed = await pass();
    expect(resumed.probed).toMatchObject([{ scope, key: "k", tool: TOOL, answer: "applied", action: "resolved" }]);
    expect(sent()).toBe(2);
    expect(provider.effectsOf(derivedKey(scope, "k"))).toBe(1);
  });
});
