import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { flaggedFreshKeyDuplicates } from "@/lib/anomalies/anomalies";
import { reconcileRuntime } from "@/lib/process/background";
import type { FreshKeyDuplicateEvidence } from "@/lib/anomalies/anomaly-types";
import { createApiToken } from "@/lib/auth/api-tokens";
import { handleInvoke } from "@/lib/gateway/fast-invoke";
import type { Runtime } from "@/lib/server/runtime";
import { createRedisKeyStore } from "@/lib/store/redis/redis-key-store";
import { getRegistry } from "@/lib/tools";
import { createTestPostgres, REDIS_TEST_URL, type TestPostgres } from "@/test/support/databases";
import { deleteRedisPrefix } from "@/test/support/stores";
import { formatSummary, runSimulation, type FreshKeyDuplicateSent, type SimulationOptions, type SimulationSummary } from ".";
import { installTestRuntime } from "@/test/support/runtime";

/**
 * The simulator against a real gateway: the node:http invoke path (as `npm start` serves it) over a
 * real runtime (Redis key store, PostgreSQL audit log, the demo tools), and the real reconciler
 * after each run. Fresh-key duplicates are caused on purpose; the summary says how many were caught.
 */
describe("simulated traffic through a real gateway: fresh-key duplicates caught vs caused", () => {
  let pg: TestPostgres;
  let runtime: Runtime;
  let gateway: Server;
  let url: string;
  const prefix = `idgtest-sim-${Math.random().toString(36).slice(2, 8)}`;
  const figures: string[] = [];

  beforeAll(async () => {
    pg = await createTestPostgres("simulate_gateway");
    const store = createRedisKeyStore(REDIS_TEST_URL, { prefix });
    if (!(await store.waitUntilReady(5_000))) throw new Error(`Redis is not reachable at ${REDIS_TEST_URL}`);
    const registry = getRegistry();
    runtime = installTestRuntime({ db: pg.db, store, registry });
    gateway = createServer((req, res) => {
      if (handleInvoke(req, res)) return;
      if (req.method === "GET" && req.url === "/api/v1/tools") {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ tools: registry.list().map((tool) => registry.describe(tool)) }));
        return;
      }
      res.writeHead(404);
      res.end();
    });
    await new Promise<void>((resolve) => gateway.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    gateway?.closeAllConnections();
    await new Promise((resolve) => gateway?.close(resolve));
    await runtime?.close();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    if (figures.length) console.log(`\nsimulator, fresh-key duplicates caught vs caused:\n${figures.map((f) => `  ${f}`).join("\n")}`);
  });

  const flaggedKeys = async (scope: string) =>
    new Set((await pg.db.prisma.anomaly.findMany({ where: { scope, type: "fresh_key_duplicate" }, select: { key: true } })).map((a) => a.key!));

  /** One reconciler pass over what the run wrote, as the server's background job runs it. */
  const reconcileAfterRun = async () => {
    await runtime.audit.flush();
    return reconcileRuntime(runtime, { settleMs: 0 });
  };

  async function simulate(label: string, options: Partial<SimulationOptions>): Promise<{ summary: SimulationSummary; scope: string }> {
    const scope = `sim-${label}-${Math.random().toString(36).slice(2, 8)}`;
    const { token } = await createApiToken(pg.db.prisma, { scope, actor: "test" });
    const since = new Date();
    const summary = await runSimulation({
      url,
      token,
      agents: 6,
      durationMs: 15_000,
      // the whole plan is sent however busy the machine is: the counts below are the plan's
      sendLimitMs: 90_000,
      // each answer is counted by what it says (a crash, a conflict): a client timeout of 800 ms let a
      // busy machine turn a crash's answer into a timeout; slow calls are planned above whatever it is
      clientTimeoutMs: 3_000,
      runId: label,
      checkFreshKeys: async (ran: readonly FreshKeyDuplicateSent[]) => {
        await reconcileAfterRun();
        return flaggedFreshKeyDuplicates(pg.db.prisma, { tools: ran.map((d) => d.tool), keys: ran.map((d) => d.key), since });
      },
      ...options,
    });
    const f = summary.freshKeys;
    figures.push(`${label}: caused ${f.caused}, caught ${f.caught} (suppressed ${f.suppressed}, ran ${f.ran}, flagged ${f.flagged}, missed ${f.missed.length})`);
    return { summary, scope };
  }

  it("every fresh-key duplicate that ran is flagged, against its original; nothing else is", async () => {
    const { summary, scope } = await simulate("orchestrator", { seed: 7, faults: true, genuineRepeats: true });
    const f = summary.freshKeys;
    expect(f.caused).toBeGreaterThanOrEqual(3);
    expect(f.suppressed).toBe(0); // orchestrator keys are never matched by their arguments
    expect(f.ran).toBe(f.caused);
    expect(f.missed).toEqual([]);
    expect(f.flagged).toBe(f.ran);
    expect(f.caught).toBe(f.caused);
    expect(formatSummary(summary)).toContain(`Fresh-key duplicates: caught ${f.caused} of ${f.caused} caused.`);

    // every duplicate side effect happened: one more charge, message or ticket per duplicate
    const effects = await Promise.all([pg.db.prisma.demoCharge.count({ where: { scope } }), pg.db.prisma.demoEmail.count({ where: { scope } }), pg.db.prisma.demoTicket.count({ where: { scope } })]);
    expect(effects.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(f.caused * 2);

    // no false positives: the genuine repeats (keyless, reused keys), retries and re-emissions are not fresh-key duplicates
    const anomalies = await pg.db.prisma.anomaly.findMany({ where: { scope, type: "fresh_key_duplicate" } });
    expect(anomalies.map((a) => a.key).sort()).toEqual(f.sent.map((d) => d.key).sort());
    for (const a of anomalies) {
      const evidence = a.evidence as unknown as FreshKeyDuplicateEvidence;
      const sent = f.sent.find((d) => d.key === a.key)!;
      expect(evidence.original.key).toBe(sent.originalKey);
      expect(evidence.duplicate.session).toBe(sent.session);
      expect(evidence.gapMs).toBeLessThan(evidence.windowMs);
    }
    expect(summary.caused.genuineRepeatsFallback + summary.caused.genuineRepeatsReusedKey).toBeGreaterThan(0);
  }, 180_000);

  it("under model-minted keys every fresh-key duplicate is suppressed at once: one side effect, nothing to flag", async () => {
    const { summary, scope } = await simulate("model-keys", { seed: 7, modelKeys: true, genuineRepeats: true });
    const f = summary.freshKeys;
    expect(f.caused).toBeGreaterThanOrEqual(3);
    expect(f.modelKeys).toBe(true);
    expect(f.suppressed).toBe(f.caused);
    expect(f.ran).toBe(0);
    expect(f.caught).toBe(f.caused);
    await runtime.audit.flush();
    expect(await pg.db.prisma.suppression.count({ where: { scope, kind: "fresh_key" } })).toBe(f.caused);
    await reconcileAfterRun();
    expect(await flaggedKeys(scope)).toEqual(new Set());
  }, 180_000);

  it("a run without fresh-key duplicates flags none, genuine repeats and faults included", async () => {
    const { summary, scope } = await simulate("no-fresh-keys", { seed: 7, freshKeyDuplicates: false, faults: true, genuineRepeats: true });
    expect(summary.freshKeys).toMatchObject({ caused: 0, caught: 0 });
    expect(summary.totals.executed).toBeGreaterThan(10);
    // the crash path: an abandoned call is final in the client (no retry into a conflict), its key
    // held; an unknown outcome is final too
    for (const tally of [summary.totals]) expect(tally.crashes).toBe(summary.caused.crashes);
    expect(summary.caused.expectedStuckKeys).toHaveLength(summary.caused.crashes);
    expect(summary.totals.unknown).toBeGreaterThanOrEqual(summary.caused.unknownOutcomes);
    const report = await reconcileAfterRun();
    expect(report.flagged.filter((a) => a.type === "fresh_key_duplicate" && a.scope === scope)).toEqual([]);
    expect(await flaggedKeys(scope)).toEqual(new Set());
  }, 180_000);
});
