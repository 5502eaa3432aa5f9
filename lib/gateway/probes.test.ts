import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GET as heldRoute } from "@/app/api/v1/tools/[tool]/held/route";
import { reconcile } from "@/lib/anomalies/reconcile";
import { createApiToken } from "@/lib/auth/api-tokens";
import { IdemgateClient, OutcomeUnknownError, type HeldCall, type ResolverDecision } from "@/lib/client/index";
import { handleInvoke } from "@/lib/gateway/fast-invoke";
import { releaseKey } from "@/lib/operator/release-key";
import type { Runtime } from "@/lib/server/runtime";
import { defineTool } from "@/lib/tools/define-tool";
import { demoTools } from "@/lib/tools/demo";
import { ToolRegistry } from "@/lib/tools/registry";
import { installTestRuntime } from "@/test/support/runtime";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";

// The probe API for held calls of tools that run in their caller's process (list, claim, answer),
// over HTTP (the gateway's fast path for the POSTs, the App Router route for the list) against real
// key stores and a real audit database; and the TypeScript client's resolver and guard() probe
// against it.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** a client-run tool whose lease ends soon, so a crashed call turns stuck within a test */
const shortLease = defineTool({
  name: "probe.charge",
  kind: "write",
  runs: "client",
  description: "a charge at a payment provider, in the caller's process",
  leaseMs: 1_500,
  schema: z.strictObject({ orderId: z.string(), amountCents: z.number().int() }),
});

for (const kind of ["postgres", "redis"] as const) {
  describe(`the probe API (${kind} key store)`, () => {
    let under: StoreUnderTest;
    let runtime: Runtime;
    let server: Server;
    let base: string;
    let tokenA: string;
    let tokenB: string;

    beforeAll(async () => {
      under = await openTestStore(kind);
      runtime = installTestRuntime({ db: under.db, store: under.store, registry: new ToolRegistry([...demoTools, shortLease]) });
      tokenA = (await createApiToken(under.db.prisma, { scope: "tenant-a", actor: "test" })).token;
      tokenB = (await createApiToken(under.db.prisma, { scope: "tenant-b", actor: "test" })).token;
      server = createServer((req, res) => {
        if (handleInvoke(req, res)) return;
        const match = /^\/api\/v1\/tools\/([^/?]+)\/held/.exec(req.url ?? "");
        if (req.method !== "GET" || !match) return void res.writeHead(404).end();
        const request = new Request(`http://local${req.url}`, { headers: req.headers as Record<string, string> });
        void heldRoute(request, { params: Promise.resolve({ tool: match[1] }) }).then(async (answer) => {
          res.writeHead(answer.status, Object.fromEntries(answer.headers));
          res.end(await answer.text());
        });
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });

    afterAll(async () => {
      server?.closeAllConnections();
      await new Promise((resolve) => server?.close(resolve));
      await runtime?.close();
      await under?.cleanup();
    });

    const headers = (t: string, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${t}`, "content-type": "application/json", ...extra });
    async function call(method: "GET" | "POST", path: string, body?: unknown, t = tokenA) {
      const res = await fetch(base + path, { method, headers: headers(t), body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, headers: res.headers, body: (await res.json()) as Json };
    }
    const client = (t = tokenA) => new IdemgateClient({ baseUrl: base, token: t, replayCache: false, retry: { maxAttempts: 2, baseDelayMs: 50 } });

    /** a call of `tool` whose guarded function threw after its effect: held as unknown */
    async function unknownCall(tool: string, args: Record<string, unknown>, t = tokenA): Promise<{ key: string; executionId: string }> {
      const key = randomUUID();
      const err = await client(t)
        .guard(tool, args, () => {
          throw new Error("the provider timed out");
        }, { key, onWarning: () => {} })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OutcomeUnknownError);
      return { key, executionId: (err as OutcomeUnknownError).executionId! };
    }

    /** a reservation whose process died before it reported: stuck once its lease passes */
    async function crashedCall(args: Record<string, unknown>, t = tokenA): Promise<{ key: string; executionId: string; leaseUntil: string }> {
      const key = randomUUID();
      const res = await fetch(`${base}/api/v1/tools/probe.charge/reservations`, { method: "POST", headers: headers(t, { "idempotency-key": key }), body: JSON.stringify({ arguments: args }) });
      expect(res.status).toBe(201);
      const body = (await res.json()) as Json;
      return { key, executionId: body.executionId, leaseUntil: body.leaseUntil };
    }

    async function listAll(tool: string, t = tokenA, limit = 100): Promise<Json[]> {
      const items: Json[] = [];
      let cursor: string | null = null;
      do {
        const page = await call("GET", `/api/v1/tools/${tool}/held?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, undefined, t);
        expect(page.status).toBe(200);
        items.push(...page.body.items);
        cursor = page.body.nextCursor;
      } while (cursor);
      return items;
    }

    const claim = (id: string, body: unknown = { holder: "worker-1:42" }, t = tokenA) => call("POST", `/api/v1/executions/${id}/probe/claim`, body, t);
    const answer = (id: string, body: unknown, t = tokenA) => call("POST", `/api/v1/executions/${id}/probe/answer`, body, t);

    it("lists a tenant's held calls with their kept arguments, paged, and never another tenant's", async () => {
      const a1 = await unknownCall("probe.charge", { orderId: "o-a1", amountCents: 100 });
      const a2 = await unknownCall("probe.charge", { orderId: "o-a2", amountCents: 200 });
      const b1 = await unknownCall("probe.charge", { orderId: "o-b1", amountCents: 300 }, tokenB);
      const mine = await listAll("probe.charge", tokenA, 1);
      const ids = mine.map((i) => i.executionId);
      expect(ids).toEqual(expect.arrayContaining([a1.executionId, a2.executionId]));
      expect(ids).not.toContain(b1.executionId);
      const item = mine.find((i) => i.executionId === a1.executionId)!;
      expect(item).toMatchObject({ tool: "probe.charge", key: a1.key, scope: "tenant-a", state: "unknown", arguments: { orderId: "o-a1", amountCents: 100 } });
      expect(item.note).toContain("the provider timed out");
      expect(item.probe).toEqual({ attempts: 0, claimedUntil: null, nextProbeAt: null, lastNote: null });
      // another tenant's call is not found, as one that does not exist
      expect((await claim(b1.executionId)).status).toBe(404);
      expect((await claim(b1.executionId, {}, tokenB)).status).toBe(200);
      // a cursor of one tenant's listing is refused in another's
      const page = await call("GET", "/api/v1/tools/probe.charge/held?limit=1");
      expect((await call("GET", `/api/v1/tools/probe.charge/held?cursor=${encodeURIComponent(page.body.nextCursor)}`, undefined, tokenB)).body.type).toBe("/problems/invalid_cursor");
      // a tool the gateway runs itself is probed by its reconciler, not listed here
      expect((await call("GET", "/api/v1/tools/payments.charge/held")).status).toBe(400);
    });

    it("applied: one claim at a time, the key done with the probe's result, recorded as the probe's, the anomaly closed", async () => {
      const held = await unknownCall("probe.charge", { orderId: "o-42", amountCents: 4200 });
      // the reconciler flags it once the log has its outcome (written in batches)
      let anomaly = null;
      while (!anomaly) {
        await reconcile({ prisma: under.db.prisma, store: under.store, engine: runtime.engine });
        anomaly = await under.db.prisma.anomaly.findFirst({ where: { scope: "tenant-a", key: held.key, type: "orphan_unknown_outcome" } });
      }
      expect(anomaly.status).toBe("open");

      // racing claims (as from several processes): exactly one gets it
      const claims = await Promise.all(Array.from({ length: 5 }, (_, i) => claim(held.executionId, { holder: `proc-${i}` })));
      expect(claims.filter((c) => c.status === 200)).toHaveLength(1);
      const refused = claims.filter((c) => c.status !== 200);
      for (const r of refused) {
        expect(r.status).toBe(409);
        expect(r.body.type).toBe("/problems/probe_claimed");
        expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
      }
      const won = claims.find((c) => c.status === 200)!;
      expect(won.body.call).toMatchObject({ executionId: held.executionId, key: held.key, arguments: { orderId: "o-42", amountCents: 4200 } });

      const out = await answer(held.executionId, { claim: won.body.claim, outcome: "applied", body: { chargeId: "ch_42" } });
      expect(out).toMatchObject({ status: 200, body: { decision: "resolved", state: "done" } });
      // a retry replays the probe's result without running
      let ran = 0;
      expect(await client().guard("probe.charge", { orderId: "o-42", amountCents: 4200 }, () => ++ran, { key: held.key })).toEqual({ chargeId: "ch_42" });
      expect(ran).toBe(0);
      // recorded as the probe's (its token and process), never an operator's; the anomaly is closed by it
      const trail = await under.db.prisma.operatorAction.findMany({ where: { scope: "tenant-a", key: held.key }, orderBy: { at: "asc" } });
      const decision = trail.find((a) => a.action === "resolve")!;
      expect(decision.actor).toMatch(/^probe:token:[^@]+@proc-\d$/);
      expect(decision.stateAfter).toMatchObject({ state: "done", probe: { outcome: "applied", source: "client" } });
      expect(trail.find((a) => a.action === "resolve_anomaly")?.actor).toBe(decision.actor);
      expect((await under.db.prisma.anomaly.findUnique({ where: { id: anomaly.id } }))?.status).toBe("resolved");
      // decided: no longer listed, nor claimed
      expect((await listAll("probe.charge")).map((i) => i.executionId)).not.toContain(held.executionId);
      expect((await claim(held.executionId)).body.type).toBe("/problems/not_held");
    });

    it("not applied is refused while the call's lease lasts, and frees the key once it has ended", async () => {
      const crashed = await crashedCall({ orderId: "o-7", amountCents: 700 });
      // an unknown call within its lease: claimable, but "not applied" may not free it yet
      const held = await unknownCall("probe.charge", { orderId: "o-8", amountCents: 800 });
      const c = await claim(held.executionId);
      expect(c.body.call.leaseEnded).toBe(false);
      const early = await answer(held.executionId, { claim: c.body.claim, outcome: "not_applied" });
      expect(early.status).toBe(409);
      expect(early.body.type).toBe("/problems/lease_running");
      expect(await runtime.store.get("tenant-a", held.key)).toMatchObject({ status: "unknown" });

      // the crashed call is listed once its lease has passed (stuck), and then not applied frees it
      let stuck: Json | undefined;
      while (!stuck) stuck = (await listAll("probe.charge")).find((i) => i.executionId === crashed.executionId && i.state === "stuck");
      expect(stuck.leaseEnded).toBe(true);
      const c2 = await claim(crashed.executionId);
      expect(await answer(crashed.executionId, { claim: c2.body.claim, outcome: "not_applied", note: "no charge for o-7" })).toMatchObject({ status: 200, body: { decision: "released", state: "absent" } });
      let ran = 0;
      expect(await client().guard("probe.charge", { orderId: "o-7", amountCents: 700 }, () => ({ ran: ++ran }), { key: crashed.key })).toEqual({ ran: 1 });
    });

    it("unknown leaves the call held and backs its next probe off; a lapsed claim's answer is refused once another process claimed it", async () => {
      const held = await unknownCall("probe.charge", { orderId: "o-9", amountCents: 900 });
      const c = await claim(held.executionId, { holder: "a", leaseMs: 1_000 });
      const out = await answer(held.executionId, { claim: c.body.claim, outcome: "unknown", note: "the provider is down" });
      expect(out.body).toMatchObject({ decision: "none", state: "unknown", nextProbeAt: expect.any(String) });
      const listed = (await listAll("probe.charge")).find((i) => i.executionId === held.executionId)!;
      expect(listed.probe).toMatchObject({ attempts: 1, claimedUntil: null, nextProbeAt: out.body.nextProbeAt, lastNote: "the provider is down" });
      const backing = await claim(held.executionId);
      expect(backing.body.type).toBe("/problems/probe_claimed");
      expect(backing.headers.get("retry-after")).not.toBeNull();
      expect(await runtime.store.get("tenant-a", held.key)).toMatchObject({ status: "unknown" });

      // a claim that lapsed, taken by another process: the first one's answer changes nothing
      const other = await unknownCall("probe.charge", { orderId: "o-10", amountCents: 1000 });
      const first = await claim(other.executionId, { holder: "slow", leaseMs: 1_000 });
      let second = await claim(other.executionId, { holder: "fast" });
      while (second.status !== 200) second = await claim(other.executionId, { holder: "fast" });
      const stale = await answer(other.executionId, { claim: first.body.claim, outcome: "applied", body: { wrong: true } });
      expect(stale.body.type).toBe("/problems/probe_claimed");
      expect(await runtime.store.get("tenant-a", other.key)).toMatchObject({ status: "unknown" });
      expect(await answer(other.executionId, { claim: second.body.claim, outcome: "applied", body: { ok: true } })).toMatchObject({ status: 200, body: { decision: "resolved" } });
    });

    it("an answer for a call an operator already decided is refused and kept as a late answer", async () => {
      const held = await unknownCall("probe.charge", { orderId: "o-11", amountCents: 1100 });
      const c = await claim(held.executionId, { holder: "late-proc" });
      await releaseKey(runtime, { scope: "tenant-a", key: held.key, actor: "ops@example.com", reason: "checked the provider" });
      const late = await answer(held.executionId, { claim: c.body.claim, outcome: "applied", body: { chargeId: "ch_11" } });
      expect(late.status).toBe(409);
      expect(late.body.type).toBe("/problems/not_held");
      expect(await runtime.store.get("tenant-a", held.key)).toBeNull();
      const kept = await under.db.prisma.operatorAction.findFirst({ where: { scope: "tenant-a", key: held.key, action: "probe_late" } });
      expect(kept?.actor).toMatch(/^probe:token:.+@late-proc$/);
      expect(kept?.stateAfter).toMatchObject({ state: "absent", probe: { outcome: "applied" } });
    });

    it("a call held again from the audit log after the key store lost it is listed, claimed and resolved", async () => {
      if (!under.loseData) return expect(kind).toBe("postgres");
      const held = await unknownCall("probe.charge", { orderId: "o-lost", amountCents: 5 });
      await runtime.audit.flush();
      await under.loseData();
      // the reconciler's held-calls pass holds it again (under a new reservation token) for the same execution
      expect(await runtime.engine.restoreHeld("tenant-a", held.key)).toMatchObject({ status: "unknown", executionId: held.executionId });
      expect((await listAll("probe.charge")).map((i) => i.executionId)).toContain(held.executionId);
      const c = await claim(held.executionId);
      expect(c.status).toBe(200);
      expect(await answer(held.executionId, { claim: c.body.claim, outcome: "applied", body: { chargeId: "ch_lost" } })).toMatchObject({ status: 200, body: { decision: "resolved" } });
      expect(await client().guard("probe.charge", { orderId: "o-lost", amountCents: 5 }, () => ({ ran: true }), { key: held.key })).toEqual({ chargeId: "ch_lost" });
    });

    it("refuses bad bodies with a problem and changes nothing", async () => {
      const held = await unknownCall("probe.charge", { orderId: "o-12", amountCents: 1200 });
      expect((await claim(held.executionId, { leaseMs: 5 })).body.type).toBe("/problems/invalid_request");
      const c = await claim(held.executionId);
      expect((await answer(held.executionId, { claim: c.body.claim, outcome: "maybe" })).body.type).toBe("/problems/invalid_request");
      expect((await answer(held.executionId, { claim: c.body.claim, outcome: "applied" })).body.type).toBe("/problems/invalid_request");
      expect((await answer(held.executionId, { claim: c.body.claim, outcome: "applied", status: 500, body: null })).body.type).toBe("/problems/invalid_request");
      expect((await claim("not-an-id")).status).toBe(404);
      expect(await runtime.store.get("tenant-a", held.key)).toMatchObject({ status: "unknown" });
    });

    it("the TypeScript resolver: several processes at once, each call probed by one, a probe that throws or hangs is still unknown", async () => {
      // the payment provider, as the probe asks it: which orders were charged
      const charged = new Map<string, string>([["o-r1", "ch_r1"]]);
      const r1 = await unknownCall("probe.charge", { orderId: "o-r1", amountCents: 1 });
      const r2 = await unknownCall("probe.charge", { orderId: "o-r2", amountCents: 2 });
      const r3 = await unknownCall("probe.charge", { orderId: "o-r3", amountCents: 3 });
      const r4 = await unknownCall("probe.charge", { orderId: "o-r4", amountCents: 4 });
      const asked = new Map<string, number>();
      const decisions: ResolverDecision[] = [];
      const probe = async (heldCall: HeldCall) => {
        const orderId = (heldCall.arguments as { orderId: string }).orderId;
        asked.set(heldCall.executionId, (asked.get(heldCall.executionId) ?? 0) + 1);
        if (orderId === "o-r3") throw new Error("provider API 503");
        if (orderId === "o-r4") return new Promise<never>(() => {});
        if (!heldCall.leaseEnded) return null;
        const charge = charged.get(orderId);
        return charge ? { applied: true as const, result: { chargeId: charge } } : { applied: false as const };
      };
      const resolvers = [1, 2, 3].map((n) =>
        client().startResolver({ "probe.charge": probe }, { holder: `proc-${n}`, intervalMs: 200, probeTimeoutMs: 300, onDecision: (d) => decisions.push(d), onError: () => {} }),
      );
      try {
        const decided = (id: string) => decisions.some((d) => d.call.executionId === id && (d.decision === "resolved" || d.decision === "released"));
        while (!decided(r1.executionId) || !decided(r2.executionId)) await new Promise((r) => setTimeout(r, 50));
        while (!decisions.some((d) => d.call.executionId === r4.executionId)) await new Promise((r) => setTimeout(r, 50));
      } finally {
        await Promise.all(resolvers.map((r) => r.stop()));
      }
      expect(decisions.filter((d) => d.call.executionId === r1.executionId && d.decision === "resolved")).toHaveLength(1);
      expect(decisions.filter((d) => d.call.executionId === r2.executionId && d.decision === "released")).toHaveLength(1);
      // probed by one process at a time: no call answered by two at once
      const answers = await under.db.prisma.operatorAction.findMany({ where: { scope: "tenant-a", key: { in: [r1.key, r2.key] }, action: { in: ["resolve", "release"] } } });
      expect(answers).toHaveLength(2);
      expect(await runtime.store.get("tenant-a", r3.key)).toMatchObject({ status: "unknown" });
      expect(await runtime.store.get("tenant-a", r4.key)).toMatchObject({ status: "unknown" });
      const r3row = await under.db.prisma.execution.findUnique({ where: { id: r3.executionId } });
      expect(r3row?.probeNote).toContain("provider API 503");
      const r4row = await under.db.prisma.execution.findUnique({ where: { id: r4.executionId } });
      expect(r4row?.probeNote).toContain("did not answer within 300 ms");
      let ran = 0;
      expect(await client().guard("probe.charge", { orderId: "o-r1", amountCents: 1 }, () => ++ran, { key: r1.key })).toEqual({ chargeId: "ch_r1" });
      expect(await client().guard("probe.charge", { orderId: "o-r2", amountCents: 2 }, () => ({ ran: ++ran }), { key: r2.key })).toEqual({ ran: 1 });
    });

    it("guard()'s own probe is asked once before it reports an unknown outcome", async () => {
      const applied = randomUUID();
      const seen: HeldCall[] = [];
      const result = await client().guard("probe.charge", { orderId: "o-g1", amountCents: 1 }, () => {
        throw new Error("SDK timeout");
      }, { key: applied, probe: (c) => (seen.push(c), { applied: true, result: { chargeId: "ch_g1" } }) });
      expect(result).toEqual({ chargeId: "ch_g1" });
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ tool: "probe.charge", key: applied, state: "running", arguments: { orderId: "o-g1", amountCents: 1 } });
      expect(await runtime.store.get("tenant-a", applied)).toMatchObject({ status: "done" });

      const notApplied = randomUUID();
      const refused = await client()
        .guard("probe.charge", { orderId: "o-g2", amountCents: 2 }, () => {
          throw new Error("connection reset");
        }, { key: notApplied, probe: () => ({ applied: false }) })
        .catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(Error);
      expect(refused).not.toBeInstanceOf(OutcomeUnknownError);
      expect(await runtime.store.get("tenant-a", notApplied)).toBeNull();

      const cannotTell = randomUUID();
      const unknown = await client()
        .guard("probe.charge", { orderId: "o-g3", amountCents: 3 }, () => {
          throw new Error("SDK timeout");
        }, { key: cannotTell, probe: () => {
          throw new Error("provider down too");
        } })
        .catch((e: unknown) => e);
      expect(unknown).toBeInstanceOf(OutcomeUnknownError);
      expect(await runtime.store.get("tenant-a", cannotTell)).toMatchObject({ status: "unknown" });
    });
  });
}
