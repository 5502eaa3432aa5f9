import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openDatabase } from "@/lib/db/database";
import { createTestPostgres } from "@/test/support/databases";
import { RedisProcess } from "@/test/support/redis-process";
import { ROOT, removeDataDir, startServer, type RunningServer } from "@/test/support/server";
import { testPort } from "@/scripts/test-ports.mjs";

// A decision about a held key whose process stops after the key store carried it and before the
// audit log recorded it (the command line's process, killed at that point by the audit writer's
// fault-suite crash point), on two real gateway processes sharing one Redis (a redis-server of this
// test's own) and one PostgreSQL; and on the embedded database, a gateway whose own reconciler stops
// right after its probe's answer reached the key store. Ports 3154–3156 are this file's (moved by
// IDEMGATE_TEST_PORT_BASE).

type Pg = Awaited<ReturnType<typeof createTestPostgres>>;

function invoke(server: RunningServer, token: string, args: unknown, key: string) {
  return fetch(`${server.url}/api/v1/tools/payments.charge/invoke`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(args),
  });
}

async function answer(server: RunningServer, token: string, args: unknown, key: string) {
  const res = await invoke(server, token, args, key);
  return { status: res.status, replayed: res.headers.get("idempotent-replayed") === "true", body: await res.text() };
}

async function waitFor<T>(what: string, probe: () => Promise<T | null | false>, timeoutMs = 120_000, everyMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

const cli = (args: string[], env: Record<string, string>) =>
  promisify(execFile)(process.execPath, [path.join(ROOT, "bin", "idemgate.mjs"), ...args], { cwd: ROOT, env: { ...process.env, ...env } });

describe("a resolve whose process stops between the key store and the audit log, then Redis lost (two gateways, Redis and PostgreSQL)", () => {
  const dataDirs = [".data/fault-decision-a", ".data/fault-decision-b"];
  let redis: RedisProcess;
  let pg: Pg;
  let a: RunningServer;
  let b: RunningServer;
  let env: Record<string, string>;

  beforeAll(async () => {
    redis = await RedisProcess.startOnFreePort();
    pg = await createTestPostgres("fault_decision");
    await Promise.all(dataDirs.map(removeDataDir));
    env = { DATABASE_URL: pg.url, REDIS_URL: redis.url, IDEMGATE_RECONCILE_INTERVAL_MS: "0" };
    a = await startServer({ port: testPort(3154), dataDir: dataDirs[0], env });
    b = await startServer({ port: testPort(3155), dataDir: dataDirs[1], env });
  });
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await redis?.dispose();
    await pg?.drop();
    await Promise.all(dataDirs.map(removeDataDir));
  });

  it("the reconciler records the decision the store carried, and after the loss both processes replay the same result; nothing is decided or charged twice", async () => {
    const { apiToken } = await a.credentials();
    const key = `decision-${randomUUID()}`;
    const args = { customerId: "cus_decision", amountCents: 4_200, currency: "EUR", simulate: { outcome: "throw_after_effect" } };
    // charged, then the call cannot tell: unknown, the key held
    expect((await answer(a, apiToken, args, key)).status).toBe(502);

    // an operator resolves it; the process stops once the key store carried the decision
    const resolving = cli(["key", "resolve", "--scope", "demo", "--key", key, "--reason", "charge seen in the PSP", "--result", '{"chargeId":"ch_psp"}', "--status", "201"], {
      ...env,
      IDEMGATE_TEST_EXIT_BEFORE_DECISION_LOG: "1",
    });
    await expect(resolving).rejects.toMatchObject({ code: 70 });
    const execution = await pg.db.prisma.execution.findFirstOrThrow({ where: { key } });
    expect(execution.outcome).toBe("unknown");
    expect(await pg.db.prisma.operatorAction.count({ where: { key, action: "resolve" } })).toBe(0);

    // gateway B answers a retry from the store and keeps the answer in its replay cache
    expect(await answer(b, apiToken, args, key)).toMatchObject({ status: 201, replayed: true, body: '{"chargeId":"ch_psp"}' });

    // Redis is lost (restarted empty); gateway A, which never saw the answer, holds the key again
    // from the log until the reconciler carries the decision out
    await redis.stop();
    await redis.start();
    const held = await waitFor("gateway A to answer again", async () => {
      const out = await answer(a, apiToken, args, key);
      return out.status === 503 ? null : out;
    });
    expect(held.status).toBe(409);

    // a reconciler pass (the command line's) carries the decision out once it has settled
    await waitFor(
      "the reconciler to carry the decision out",
      async () => {
        const { stdout } = await cli(["reconcile", "--json"], env);
        return (JSON.parse(stdout) as { finished: number }).finished === 1;
      },
      100_000,
      3_000,
    );
    const closed = await pg.db.prisma.execution.findFirstOrThrow({ where: { key } });
    expect(closed).toMatchObject({ outcome: "resolved", resultStatus: 201, resultBody: '{"chargeId":"ch_psp"}' });

    // both processes answer alike, now and after another loss
    for (let round = 0; round < 2; round++) {
      expect(await answer(a, apiToken, args, key)).toMatchObject({ status: 201, replayed: true, body: '{"chargeId":"ch_psp"}' });
      expect(await answer(b, apiToken, args, key)).toMatchObject({ status: 201, replayed: true, body: '{"chargeId":"ch_psp"}' });
      if (round === 0) {
        await redis.stop();
        await redis.start();
        await waitFor("gateway A to answer again", async () => (await invoke(a, apiToken, args, key)).status !== 503);
      }
    }
    const trail = await pg.db.prisma.operatorAction.findMany({ where: { key, action: "resolve" } });
    expect(trail.map((t) => t.reason)).toEqual([expect.stringMatching(/^charge seen in the PSP \(carried out by the reconciler/)]);
    expect(await pg.db.prisma.demoCharge.count({ where: { idempotencyKey: key } })).toBe(1);
  });
});

describe("a probe's decision whose gateway stops between the key store and the audit log (embedded)", () => {
  const dataDir = ".data/fault-decision-embedded";
  const reconciling = { IDEMGATE_RECONCILE_INTERVAL_MS: "1000" };
  let server: RunningServer;

  beforeAll(async () => {
    await removeDataDir(dataDir);
  });
  afterAll(async () => {
    await server?.stop();
    await removeDataDir(dataDir);
  });

  it("the restarted gateway's reconciler records the decision with its trail; the key replays the tool's result, charged once", async () => {
    // the gateway's reconciler asks the demo tool, which says applied; the process stops right after the key store is resolved
    server = await startServer({ port: testPort(3156), dataDir, env: { ...reconciling, IDEMGATE_TEST_EXIT_BEFORE_DECISION_LOG: "1" } });
    const { apiToken } = await server.credentials();
    const key = `decision-embedded-${randomUUID()}`;
    const args = { customerId: "cus_decision_e", amountCents: 3_100, currency: "EUR", simulate: { outcome: "throw_after_effect" } };
    expect((await answer(server, apiToken, args, key)).status).toBe(502);
    // the process itself exits at the crash point (a slow health answer on a loaded machine is no sign of it)
    let bound: NodeJS.Timeout | undefined;
    const stopped = await Promise.race([server.exited(), new Promise<"running">((r) => (bound = setTimeout(() => r("running"), 150_000)))]);
    clearTimeout(bound);
    if (stopped === "running") throw new Error(`the gateway did not stop at the crash point; it said:\n${server.output().slice(-4_000)}`);
    expect(stopped, `the gateway's exit; it said:\n${server.output().slice(-4_000)}`).toBe(70);
    await server.kill();

    // restarted without the crash point: its reconciler carries the written decision out once it has settled
    server = await startServer({ port: testPort(3156), dataDir, env: reconciling });
    const replay = await waitFor("the retry to replay the tool's result", async () => {
      const out = await answer(server, apiToken, args, key);
      return out.status === 200 && out.replayed ? out : null;
    });
    expect(JSON.parse(replay.body)).toMatchObject({ customerId: "cus_decision_e", amountCents: 3_100 });
    // the restarted gateway's reconciler says when it carried out a decision left behind
    await waitFor("the reconciler to carry the decision out", async () => /carried out 1 decision about held keys/.test(server.output()), 180_000, 1_000).catch((err: Error) => {
      throw new Error(`${err.message}; the restarted gateway said:\n${server.output().slice(-4_000)}`);
    });
    await server.stop();
    const db = await openDatabase({ dataDir: path.join(ROOT, dataDir, "pglite"), migrate: false });
    try {
      const execution = await db.prisma.execution.findFirstOrThrow({ where: { key } });
      expect(execution).toMatchObject({ outcome: "resolved", resultBody: replay.body });
      const trail = await db.prisma.operatorAction.findMany({ where: { key, action: "resolve" } });
      expect(trail.map((t) => [t.actor, t.reason])).toEqual([["reconciler", expect.stringMatching(/answered its status probe: applied .*\(carried out by the reconciler/)]]);
      expect(await db.prisma.keyDecision.count()).toBe(0);
      expect(await db.prisma.demoCharge.count({ where: { idempotencyKey: key } })).toBe(1);
    } finally {
      await db.close();
    }
    // two server starts and a reconciler that waits 30 s before it takes a decision as left behind,
    // on an embedded database beside the other suites: more than the suites' 180 s on a loaded machine
  }, 360_000);
});
