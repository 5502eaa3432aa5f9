import type { Runtime } from "@/lib/server/runtime";
import { DEMO_SCOPE } from "@/lib/process/seed";

interface DemoCall {
  tool: string;
  key: string | null;
  args: Record<string, unknown>;
  session: string;
  /** sent again with the same key, as a retrying client would */
  repeats?: { session: string }[];
}

const charge = (customerId: string, amountCents: number, extra: Record<string, unknown> = {}) => ({ customerId, amountCents, currency: "EUR", ...extra });

/**
 * A few minutes of an agent's life, so a first start has something to look at: charges and their
 * retries, a declined card replayed, a keyless ticket deduplicated, an email re-sent from another
 * conversation under the same key (a stale suppression) and a tool error. The calls an operator
 * must decide about are in LEDGER_CALLS.
 */
const CALLS: DemoCall[] = [
  { tool: "payments.charge", key: "order-1001", args: charge("cus_ada", 4_200, { description: "Team plan, November" }), session: "agent-run-1", repeats: [{ session: "agent-run-1" }, { session: "agent-run-1" }] },
  { tool: "payments.charge", key: "order-1002", args: charge("cus_grace", 1_999), session: "agent-run-1" },
  { tool: "payments.charge", key: "order-1003", args: charge("cus_linus", 12_500), session: "agent-run-2", repeats: [{ session: "agent-run-2" }] },
  { tool: "payments.charge", key: "order-1004", args: charge("cus_barbara", 700, { simulate: { outcome: "decline" } }), session: "agent-run-2", repeats: [{ session: "agent-run-2" }] },
  { tool: "payments.charge", key: "order-1005", args: charge("cus_ken", 3_000, { simulate: { outcome: "error" } }), session: "agent-run-3" },
  { tool: "email.send", key: "welcome-ada", args: { to: "ada@example.com", subject: "Welcome aboard", body: "Your team plan is active." }, session: "agent-run-1", repeats: [{ session: "agent-run-4" }] },
  { tool: "tickets.create", key: null, args: { title: "Invoice address is wrong", body: "Customer cus_grace asked to change it." }, session: "agent-run-2", repeats: [{ session: "agent-run-2" }] },
];

/**
 * Left for the operator: postings to ledger.record, the demo tool that runs in its caller's
 * process, which Idemgate cannot ask whether a posting went through (it has no status probe). So
 * the reconciler cannot settle these keys by itself, as it settles a demo charge from the charges
 * table: one whose caller reported its outcome unknown (the connection dropped after the posting
 * was sent), and one whose caller crashed while posting (stuck once its lease passes).
 */
const LEDGER_TOOL = "ledger.record";
const LEDGER_CALLS = [
  {
    key: "posting-3001",
    args: { account: "revenue:team-plans", amountCents: 4_200, currency: "EUR", memo: "order-1001, cus_ada" },
    unknown: "the ledger database connection dropped after the posting was sent; it may or may not be booked",
  },
  { key: "posting-3002", args: { account: "revenue:enterprise", amountCents: 8_800, currency: "EUR", memo: "order-1006, cus_margaret" }, unknown: null },
] as const;

/** Sends the calls through the engine; those of a demo tool that is not served are left out. */
export async function seedDemoTraffic(runtime: Runtime): Promise<number> {
  let calls = 0;
  for (const call of CALLS) {
    if (!runtime.registry.has(call.tool)) continue;
    const tool = runtime.registry.get(call.tool);
    const args = runtime.registry.parseArgs(tool, call.args);
    const run = runtime.registry.runnerFor(tool, runtime.db.prisma);
    for (const session of [call.session, ...(call.repeats ?? []).map((r) => r.session)]) {
      calls++;
      // declines, errors and crashes are what some of these calls are for
      await runtime.engine.invoke(tool, run, { scope: DEMO_SCOPE, key: call.key, args, session, caller: "demo" }).catch(() => {});
    }
  }
  if (runtime.registry.has(LEDGER_TOOL)) {
    const tool = runtime.registry.get(LEDGER_TOOL);
    for (const call of LEDGER_CALLS) {
      calls++;
      const args = runtime.registry.parseArgs(tool, call.args);
      const reserved = await runtime.engine.reserve(tool, { scope: DEMO_SCOPE, key: call.key, args, session: "agent-run-5", caller: "demo" }).catch(() => null);
      if (reserved?.kind !== "reserved" || call.unknown === null) continue; // the crashed caller never reports
      await runtime.engine
        .releaseExecution({ scope: DEMO_SCOPE, executionId: reserved.executionId, token: reserved.token, policyOf: (name) => (runtime.registry.has(name) ? runtime.registry.get(name) : undefined) }, "unknown", call.unknown)
        .catch(() => {});
    }
  }
  await runtime.audit.flush();
  return calls;
}
