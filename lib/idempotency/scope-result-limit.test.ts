import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reconcile } from "@/lib/anomalies/reconcile";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { FakeClock } from "@/test/support/engine-fixture";
import { openTestStore, STORE_KINDS, type StoreUnderTest } from "@/test/support/stores";
import { Engine, type SettleTarget } from "./engine";
import { HOUR_MS, ScopeResultLimit } from "./scope-result-limit";
import type { RunTool, ToolPolicy } from "./tool";

// Each scope (tenant) holds at most so many bytes of stored results: a completion over the limit is
// done all the same (its side effect happened: never run again) and stores a placeholder; the count
// is kept by the key store (Redis and SQL) as results are stored and lets go of them as they expire.

const LIMIT = 4_000;
const charge: ToolPolicy = { name: "payments.charge", kind: "write", ttlMs: 60_000, leaseMs: 5_000, stuckPolicy: "block", fallbackTtlMs: null, dedupes: false };
const ledger: ToolPolicy = { ...charge, name: "ledger.record", runs: "client" };
const policyOf = (name: string) => (name === ledger.name ? ledger : undefined);

describe.each(STORE_KINDS)("the per-scope limit on stored results (%s)", (kind) => {
  let t: StoreUnderTest;
  let audit: PrismaAuditWriter;
  let engine: Engine;
  let limit: ScopeResultLimit;
  const clock = new FakeClock(Date.now());

  beforeAll(async () => {
    t = await openTestStore(kind);
    audit = new PrismaAuditWriter(t.db.prisma, { flushIntervalMs: 5 });
    limit = new ScopeResultLimit(t.store.resultBytes!, LIMIT);
    engine = new Engine({ store: t.store, audit, now: clock.now, scopeResultLimit: limit });
  }, 60_000);
  afterAll(async () => {
    await audit?.close();
    await t?.cleanup();
  });

  const big = (n: number) => ({ blob: "x".repeat(1_500), n });

  it("stores a result over the tenant's limit as done with a placeholder, replays that, never runs it again, and leaves other tenants alone", async () => {
    const greedy = `greedy-${randomUUID().slice(0, 6)}`;
    const other = `other-${randomUUID().slice(0, 6)}`;
    let runs = 0;
    const run: RunTool = async (args) => {
      runs++;
      return { body: big((args as { n: number }).n) };
    };
    for (const n of [1, 2]) expect(JSON.parse((await engine.invoke(charge, run, { scope: greedy, key: `k${n}`, args: { n } })).body)).toEqual(big(n));
    // the third would pass 4,000 bytes: its caller still gets the result, the key stores a placeholder
    const third = await engine.invoke(charge, run, { scope: greedy, key: "k3", args: { n: 3 } });
    expect(JSON.parse(third.body)).toEqual(big(3));
    const record = await t.store.get(greedy, "k3");
    expect(record?.status).toBe("done");
    expect(JSON.parse(record!.result!.body)).toMatchObject({ idemgate: { resultOverTenantLimit: true, status: 200, scopeResultBytesLimit: LIMIT } });
    const replay = await engine.invoke(charge, run, { scope: greedy, key: "k3", args: { n: 3 } });
    expect(replay.kind).toBe("replayed");
    expect(JSON.parse(replay.body)).toMatchObject({ idemgate: { resultOverTenantLimit: true } });
    expect(runs).toBe(3);
    // the audit log keeps the placeholder too
    await audit.flush();
    const row = await t.db.prisma.execution.findFirst({ where: { scope: greedy, key: "k3" } });
    expect(row?.outcome).toBe("succeeded");
    expect(JSON.parse(row!.resultBody!)).toMatchObject({ idemgate: { resultOverTenantLimit: true } });
    // another tenant's results are kept whole
    expect(JSON.parse((await engine.invoke(charge, run, { scope: other, key: "k1", args: { n: 9 } })).body)).toEqual(big(9));
    expect(JSON.parse((await t.store.get(other, "k1"))!.result!.body)).toEqual(big(9));
    // counted by the store, per scope, for the metric (once the additions sent are answered)
    await limit.settled();
    const all = await t.store.resultBytes!.all(clock.ms);
    expect(all.get(greedy)).toBeGreaterThan(2 * 1_500);
    expect(all.get(greedy)).toBeLessThan(LIMIT);
    expect(all.get(other)).toBeGreaterThan(1_500);
    // the anomaly list says so: one finding for the scope, none for the tenant within its limit
    await reconcile({ prisma: t.db.prisma, store: t.store, engine }, { nowMs: clock.ms, settleMs: 0 });
    const found = await t.db.prisma.anomaly.findMany({ where: { type: "result_over_scope_limit", scope: { in: [greedy, other] } } });
    expect(found.map((a) => [a.scope, a.key, a.status])).toEqual([[greedy, null, "open"]]);
    expect(found[0].evidence).toMatchObject({ key: "k3", limitBytes: LIMIT });
    expect((found[0].evidence as { resultBytes: number }).resultBytes).toBeGreaterThan(1_500);
  });

  it("applies to results a client-run call completes with, and a resend of the same completion is answered as the first", async () => {
    const s = `client-${randomUUID().slice(0, 6)}`;
    const completed: { state: string; body?: string }[] = [];
    for (const n of [1, 2, 3]) {
      const r = await engine.reserve(ledger, { scope: s, key: `k${n}`, args: { n } });
      if (r.kind !== "reserved") throw new Error(`expected a reservation, got ${r.kind}`);
      const target: SettleTarget = { scope: s, executionId: r.executionId, token: r.token, policyOf };
      completed.push(await engine.completeExecution(target, { status: 201, body: big(n) }));
      if (n === 3) {
        const again = await engine.completeExecution(target, { status: 201, body: big(n) });
        expect(again).toMatchObject({ state: "done", replayed: true });
        expect(JSON.parse((again as { body: string }).body)).toMatchObject({ idemgate: { resultOverTenantLimit: true } });
      }
    }
    expect(JSON.parse(completed[1].body!)).toEqual(big(2));
    expect(JSON.parse(completed[2].body!)).toMatchObject({ idemgate: { resultOverTenantLimit: true, status: 201 } });
    expect((await t.store.get(s, "k3"))?.status).toBe("done");
  });

  it("gathers a process's completions and adds them to the store in one addition, its own count up to date meanwhile", async () => {
    const a = `gather-a-${randomUUID().slice(0, 6)}`;
    const b = `gather-b-${randomUUID().slice(0, 6)}`;
    const counter = t.store.resultBytes!;
    const sent: number[] = [];
    const counting = { ...counter, add: async (additions: Parameters<typeof counter.add>[0]) => (sent.push(additions.length), counter.add(additions)) };
    // an interval no test waits out: nothing goes to the store before settled()
    const gathering = new ScopeResultLimit(counting, 10_000, 3_600_000);
    const body = (n: number) => ({ status: 200, body: "y".repeat(n), final: false });
    await gathering.admit(a, body(1_000), 60_000, clock.ms);
    await gathering.admit(a, body(2_000), 60_000, clock.ms);
    await gathering.admit(b, body(500), 60_000, clock.ms);
    await gathering.admit(a, body(3_000), 2 * HOUR_MS, clock.ms);
    expect(sent).toEqual([]);
    expect(await counter.usage(a, clock.ms)).toBe(0);
    // this process counts its own completions already: a fourth kilobyte-sized result in a passes 10,000
    const over = await gathering.admit(a, body(4_500), 60_000, clock.ms);
    expect(JSON.parse(over.body)).toMatchObject({ idemgate: { resultOverTenantLimit: true } });
    await gathering.settled();
    // one addition: (a, this hour), (b, this hour), (a, two hours on)
    expect(sent).toEqual([3]);
    expect(await counter.usage(a, clock.ms)).toBe(6_000 + Buffer.byteLength(over.body));
    expect(await counter.usage(b, clock.ms)).toBe(500);
    expect(await counter.usage(a, clock.ms + 60_000 + HOUR_MS)).toBe(3_000);
    await gathering.settled();
    expect(sent).toEqual([3]);
  });

  it("a process reading its scope's count again still counts what it gathered and has not sent", async () => {
    const s = `reread-${randomUUID().slice(0, 6)}`;
    const gathering = new ScopeResultLimit(t.store.resultBytes!, 10_000, 3_600_000);
    const body = (n: number) => ({ status: 200, body: "z".repeat(n), final: false });
    expect((await gathering.admit(s, body(6_000), 60_000, clock.ms)).body).toBe("z".repeat(6_000));
    // past the 5 s a count read from the store is used: read again, the store still says 0
    const over = await gathering.admit(s, body(5_000), 60_000, clock.ms + 6_000);
    expect(JSON.parse(over.body)).toMatchObject({ idemgate: { resultOverTenantLimit: true } });
    await gathering.settled();
  });

  it("additions from several processes over the same scopes, in opposite orders, all land", async () => {
    const scopes = Array.from({ length: 40 }, (_, i) => `many-${i}-${randomUUID().slice(0, 6)}`);
    const counter = t.store.resultBytes!;
    const additions = (reversed: boolean) => (reversed ? [...scopes].reverse() : scopes).map((scope) => ({ scope, bytes: 1, expiresAtMs: clock.ms + 60_000 }));
    const settled = await Promise.allSettled(Array.from({ length: 16 }, (_, i) => counter.add(additions(i % 2 === 1))));
    expect(settled.filter((r) => r.status === "rejected")).toEqual([]);
    for (const scope of [scopes[0], scopes[20], scopes[39]]) expect(await counter.usage(scope, clock.ms)).toBe(16);
  });

  it("lets go of results once the hour their keys expire in has passed", async () => {
    const s = `expiring-${randomUUID().slice(0, 6)}`;
    const counter = t.store.resultBytes!;
    await counter.add([{ scope: s, bytes: 2_000, expiresAtMs: clock.ms + 60_000 }, { scope: s, bytes: 1_000, expiresAtMs: clock.ms + 60_000 }]);
    expect(await counter.usage(s, clock.ms)).toBe(3_000);
    expect(await counter.usage(s, clock.ms + 60_000 + HOUR_MS)).toBe(0);
    // a fresh limit (no bytes read before) in a process whose clock is past that hour
    const later = new ScopeResultLimit(counter, LIMIT);
    const kept = await later.admit(s, { status: 200, body: JSON.stringify(big(1)), final: false }, 60_000, clock.ms + 60_000 + HOUR_MS);
    expect(JSON.parse(kept.body)).toEqual(big(1));
  });
});
