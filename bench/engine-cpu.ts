// CPU per first execution of the engine as the peers section runs it (audit async unless --mode durable, replay cache on,
// 50 callers in this process, Redis key store, audit log on the local PostgreSQL): this process's
// CPU by process.cpuUsage() and the CPU of the PostgreSQL backends serving its pool (from
// /proc/<pid>/stat, so only with the server on this machine), each over whole rounds including the
// audit batches they left behind. Prints one JSON line per round. CPU, unlike calls/s, hardly moves
// with the load the machine carries besides, so two trees' figures compare run against run:
//   npx tsx bench/engine-cpu.ts [--calls 5000] [--rounds 3] [--concurrency 50] [--mode async|durable] [--replay-cache on|off] [--profile out.cpuprofile]
// --profile writes a V8 CPU profile of the rounds (warm-up left out; bench/cpuprofile-summary.mjs reads it).
import { randomUUID } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import inspector from "node:inspector";
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import pgDriver from "pg";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { ReplayCache } from "@/lib/idempotency/replay-cache";
import type { ToolPolicy } from "@/lib/idempotency/tool";
import { createRedisKeyStore } from "@/lib/store/redis/redis-key-store";
import { createTestPostgres, POSTGRES_ADMIN_URL, REDIS_TEST_URL } from "@/test/support/databases";
import { deleteRedisPrefix } from "@/test/support/stores";
import { timeConcurrent } from "./stats";

const { values } = parseArgs({ options: { calls: { type: "string", default: "5000" }, rounds: { type: "string", default: "3" }, concurrency: { type: "string", default: "50" }, mode: { type: "string", default: "async" }, "replay-cache": { type: "string", default: "on" }, profile: { type: "string" } } });
const calls = Number(values.calls);
const rounds = Number(values.rounds);
const concurrency = Number(values.concurrency);
if (values.mode !== "async" && values.mode !== "durable") throw new Error(`--mode is async or durable, not ${values.mode}`);
if (values["replay-cache"] !== "on" && values["replay-cache"] !== "off") throw new Error(`--replay-cache is on or off, not ${values["replay-cache"]}`);

const tool: ToolPolicy = { name: "bench.write", kind: "write", ttlMs: 86_400_000, leaseMs: 60_000, stuckPolicy: "block", fallbackTtlMs: null, dedupes: false };
const ARGS = { customerId: "cus_bench", amountCents: 1_000, currency: "EUR" };
const RESULT = { ok: true };

/** user + system CPU of a process, in microseconds (clock ticks of /proc/<pid>/stat) */
function procCpuUs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) * (1_000_000 / 100);
  } catch {
    return 0;
  }
}

const prefix = `idgcpu-${randomUUID().slice(0, 8)}`;
const pg = await createTestPostgres("bench_cpu");
const store = createRedisKeyStore(REDIS_TEST_URL, { prefix });
await store.waitUntilReady(5_000);
const audit = new PrismaAuditWriter(pg.db.prisma, { mode: values.mode, execute: pg.db.execute });
const engine = new Engine({ store, audit, replayCache: values["replay-cache"] === "on" ? new ReplayCache() : null });
const call = (key: string) => engine.invoke(tool, async () => ({ body: RESULT }), { scope: "bench", key, args: ARGS });
const database = new URL(pg.url).pathname.slice(1);
// asked on a connection of its own to another database, so every backend listed serves the pool
const admin = new pgDriver.Client({ connectionString: POSTGRES_ADMIN_URL });
await admin.connect();
const backends = async () => (await admin.query(`SELECT pid FROM pg_stat_activity WHERE datname = $1`, [database])).rows.map((r) => Number(r.pid));
try {
  // warm up, then past the first seconds of the store's epoch (first executions also read the log there)
  const warmStarted = Date.now();
  await timeConcurrent(1_000, concurrency, (i) => call(`warm:${i}`));
  await audit.flush();
  await new Promise((r) => setTimeout(r, Math.max(0, 10_500 - (Date.now() - warmStarted))));
  await timeConcurrent(1_000, concurrency, (i) => call(`warm2:${i}`));
  await audit.flush();
  const session = values.profile ? new inspector.Session() : null;
  const post = (method: string, params: object = {}) =>
    new Promise<unknown>((resolve, reject) => session!.post(method, params, (err, res) => (err ? reject(err) : resolve(res))));
  if (session) {
    session.connect();
    await post("Profiler.enable");
    await post("Profiler.setSamplingInterval", { interval: 200 });
    await post("Profiler.start");
  }
  for (let round = 0; round < rounds; round++) {
    const pids = await backends();
    const before = new Map(pids.map((p) => [p, procCpuUs(p)]));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const load = await timeConcurrent(calls, concurrency, (i) => call(`f:${round}:${i}`));
    await audit.flush();
    const cpu = process.cpuUsage(cpu0);
    const wallMs = performance.now() - t0;
    // a backend that ended meanwhile (the pool closes idle connections) is left out
    const pgUs = (await backends()).reduce((s, p) => s + procCpuUs(p) - (before.get(p) ?? 0), 0);
    console.log(
      JSON.stringify({
        round,
        callsPerS: Math.round(load.throughput),
        userUs: +(cpu.user / calls).toFixed(1),
        sysUs: +(cpu.system / calls).toFixed(1),
        cpuUs: +((cpu.user + cpu.system) / calls).toFixed(1),
        pgUs: +(pgUs / calls).toFixed(1),
        wallMs: Math.round(wallMs),
        load: loadavg()[0].toFixed(1),
      }),
    );
  }
  if (session) {
    const { profile } = (await post("Profiler.stop")) as { profile: unknown };
    writeFileSync(values.profile!, JSON.stringify(profile));
    session.disconnect();
  }
} finally {
  await admin.end();
  await audit.close();
  await store.close();
  await deleteRedisPrefix(prefix);
  await pg.drop();
}
