import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { IdemgateClient } from "@/lib/client/index";
import { ensurePythonEnv } from "@/scripts/python-env.mjs";
import { POSTGRES_ADMIN_URL, REDIS_TEST_URL } from "@/test/support/databases";
import { deleteRedisPrefix } from "@/test/support/stores";
import { admin, BUILD_LOCK, killGroup, NEXT_BIN, SERVE, spawnGroup, waitFor } from "./gateway-bench";
import { medianRound, timeConcurrent, type LoadRound, type Row } from "./stats";

export interface PythonOptions {
  /** calls per contender per round (replays: ten times as many) */
  calls: number;
  rounds: number;
  build: boolean;
  port: number;
}

const TOOL = "ledger.record";
const ARGS = { account: "acct-bench", amountCents: 1_000, currency: "EUR" };
const RESULT = { ok: true };
const fn = async () => RESULT;

type PyFigures = Record<string, LoadRound>;

/**
 * The Python client (clients/python) against a production server on Redis and PostgreSQL (audit
 * durable), one caller, calls in sequence, a no-op guarded function: a first execution's added p50
 * through the sync `Idemgate.guard` and `AsyncIdemgate.guard`, against the TypeScript client's
 * guard() in the same run (target: within 1.25×); replays with the replay cache (the default) in
 * calls/s, against the floor a hand-written Python decorator pays on the same Redis, a redis-py
 * `SET NX` + `SET` pair per call (target: at least its calls/s). The Python side runs in the project's
 * Python environment (bench/python_bench.py); rounds alternate between the two languages.
 */
export async function benchPython(options: PythonOptions): Promise<Row[]> {
  const id = randomUUID().slice(0, 8);
  const dbName = `idemgate_bench_python_${id}`;
  const prefix = `idgbench-python-${id}`;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "idemgate-bench-python-"));
  const python = await ensurePythonEnv({ quiet: true });
  await admin(`CREATE DATABASE "${dbName}"`);
  const dbUrl = new URL(POSTGRES_ADMIN_URL);
  dbUrl.pathname = `/${dbName}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: "production",
    NEXT_TELEMETRY_DISABLED: "1",
    REDIS_URL: REDIS_TEST_URL,
    DATABASE_URL: dbUrl.toString(),
    IDEMGATE_REDIS_PREFIX: prefix,
    IDEMGATE_DATA_DIR: dataDir,
    IDEMGATE_SECRET: randomUUID() + randomUUID(),
    IDEMGATE_RECONCILE_INTERVAL_MS: "0",
    IDEMGATE_AUDIT_MODE: "durable",
    IDEMGATE_DEMO_TOOLS: "1",
  };
  const start = `exec node ${SERVE} -p ${options.port} -H 127.0.0.1`;
  const server = spawnGroup("flock", [BUILD_LOCK, "sh", "-c", options.build ? `node ${NEXT_BIN} build >&2 && ${start}` : start], env);
  try {
    const base = `http://127.0.0.1:${options.port}`;
    await waitFor(`${base}/api/health`, server, options.build ? 600_000 : 120_000);
    const token = /API token:\s*(\S+)/.exec(await readFile(path.join(dataDir, "credentials.txt"), "utf8"))?.[1];
    if (!token) throw new Error("no API token in credentials.txt");
    const client = new IdemgateClient({ baseUrl: base, token });
    await timeConcurrent(300, 1, (i) => client.guard(TOOL, ARGS, fn, { key: `tswarm-${id}-${i}` }));
    const replayKey = `tsreplay-${id}`;
    await client.guard(TOOL, ARGS, fn, { key: replayKey });

    const ts: { direct: LoadRound[]; first: LoadRound[]; replay: LoadRound[] } = { direct: [], first: [], replay: [] };
    const py: PyFigures[] = [];
    for (let round = 0; round < options.rounds; round++) {
      const tag = `${round}-${randomUUID().slice(0, 6)}`;
      ts.direct.push(await timeConcurrent(options.calls, 1, () => fn()));
      ts.first.push(await timeConcurrent(options.calls, 1, (i) => client.guard(TOOL, ARGS, fn, { key: `tsfirst-${tag}-${i}` })));
      ts.replay.push(await timeConcurrent(options.calls * 10, 1, () => client.guard(TOOL, ARGS, fn, { key: replayKey })));
      py.push(await runPython(python, { IDEMGATE_URL: base, IDEMGATE_TOKEN: token, REDIS_URL: REDIS_TEST_URL, BENCH_PREFIX: `${prefix}-pair`, BENCH_TAG: tag, BENCH_CALLS: String(options.calls) }));
    }
    await client.close();

    const pyRound = (name: string) => {
      const rounds = py.map((figures) => figures[name]);
      if (rounds.some((r) => !r)) throw new Error(`bench/python_bench.py did not report "${name}"`);
      return medianRound(rounds);
    };
    const tsDirect = medianRound(ts.direct);
    const tsFirst = medianRound(ts.first);
    const tsReplay = medianRound(ts.replay);
    const tsAdded = tsFirst.p50 - tsDirect.p50;
    const direct = pyRound("direct");
    const asyncDirect = pyRound("async direct");
    const pair = pyRound("redis-py SET NX + SET");
    const contenders = [
      { label: "TypeScript client.guard()", m: tsFirst, added: tsAdded },
      { label: "Python Idemgate.guard() (sync, urllib)", m: pyRound("sync first execution"), added: pyRound("sync first execution").p50 - direct.p50 },
      { label: "Python AsyncIdemgate.guard() (async def)", m: pyRound("async first execution"), added: pyRound("async first execution").p50 - asyncDirect.p50 },
      { label: "redis-py SET NX + SET (a hand-written decorator's floor, no audit)", m: pair, added: pair.p50 - direct.p50 },
    ];
    const rows: Row[] = [];
    for (const c of contenders) {
      rows.push({
        section: "python",
        name: `first execution, 1 caller: ${c.label}`,
        value: c.m.throughput,
        unit: "calls/s",
        p50: c.m.p50,
        tail: { label: "p99", ms: c.m.p99 },
        note: `added p50 ${c.added.toFixed(2)} ms`,
      });
    }
    const replays = [
      { label: "TypeScript client.guard() (replay cache)", m: tsReplay },
      { label: "Python Idemgate.guard() (replay cache)", m: pyRound("sync replay") },
      { label: "Python AsyncIdemgate.guard() (replay cache)", m: pyRound("async replay") },
    ];
    for (const r of replays) {
      rows.push({ section: "python", name: `replay, 1 caller: ${r.label}`, value: r.m.throughput, unit: "calls/s", p50: r.m.p50, tail: { label: "p99", ms: r.m.p99 }, baseline: "redis-py pair", ratio: r.m.throughput / pair.throughput });
    }
    for (const c of contenders.slice(1, 3)) {
      const ratio = c.added / tsAdded;
      rows.push({
        section: "python",
        name: `target: first execution, 1 caller: added p50 of ${c.label} against the TypeScript client's`,
        value: c.added,
        unit: "ms",
        baseline: `TypeScript ${tsAdded.toFixed(2)} ms`,
        ratio,
        target: "≤ 1.25×",
        note: ratio <= 1.25 ? "met" : "not met",
      });
    }
    for (const r of replays.slice(1)) {
      const ratio = r.m.throughput / pair.throughput;
      rows.push({
        section: "python",
        name: `target: replay, 1 caller: calls/s of ${r.label} against a redis-py SET NX + SET pair`,
        value: r.m.throughput,
        unit: "calls/s",
        baseline: `redis-py pair ${Math.round(pair.throughput)} calls/s`,
        ratio,
        target: "≥ 1.0×",
        note: ratio >= 1 ? "met" : "not met",
      });
    }
    return rows;
  } finally {
    await killGroup(server);
    await deleteRedisPrefix(prefix);
    await admin(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
  }
}

function runPython(python: string, env: Record<string, string>): Promise<PyFigures> {
  const child = spawn(python, [path.join(process.cwd(), "bench", "python_bench.py")], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1", ...env } });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  return new Promise((resolve, reject) =>
    child.once("close", (code) => {
      if (code !== 0) return reject(new Error(`bench/python_bench.py exited ${code}: ${stderr.slice(-2000)}`));
      resolve(JSON.parse(stdout.trim().split("\n").at(-1)!) as PyFigures);
    }),
  );
}
