import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { testPort } from "@/scripts/test-ports.mjs";
import { describeProbeFaultRun, type ResolverAccount } from "@/test/support/probe-fault-run";
import { ROOT } from "@/test/support/server";

// The Python side of guard-probes.test.ts: the guarded functions run in Python worker processes
// (test/support/guard_worker.py), and the Python client's resolver runs in a process of its own that
// survives every fault (test/support/probe_resolver.py: its sync resolver thread on the embedded
// server, AsyncIdemgate's task on Redis and PostgreSQL). The run, its faults and its checks:
// test/support/probe-fault-run.ts. Ports 3198, 3199, 6389 and 5489 are this file's (moved by
// IDEMGATE_TEST_PORT_BASE).

const PYTHON = process.env.PYTHON ?? "python3";
const PYTHON_ENV = { PYTHONPATH: path.join(ROOT, "clients", "python"), PYTHONDONTWRITEBYTECODE: "1" };

/** The Python resolver process: started, ready once it says so; stop() sends SIGTERM and returns its stats and decisions. */
async function startPythonResolver(env: Record<string, string>): Promise<{ stop: () => Promise<ResolverAccount> }> {
  const child: ChildProcess = spawn(PYTHON, [path.join(ROOT, "test", "support", "probe_resolver.py")], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...PYTHON_ENV, ...env },
  });
  let stdout = "";
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  const closed = new Promise<void>((resolve) => child.once("close", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d) => {
      stdout += d;
      if (stdout.includes('"ready": true')) resolve();
    });
    child.once("close", (code) => reject(new Error(`the Python resolver exited ${code} before it was ready:\n${stdout}\n${stderr}`)));
  });
  return {
    async stop() {
      child.kill("SIGTERM");
      await closed;
      const lines = stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const last = lines.at(-1) ?? {};
      if (!("stats" in last)) throw new Error(`the Python resolver ended without its stats (exit ${child.exitCode}):\n${stdout}\n${stderr.slice(-4000)}`);
      return { stats: last.stats as Record<string, unknown>, decisions: lines.filter((l) => "decision" in l) as ResolverAccount["decisions"], log: stderr };
    },
  };
}

describeProbeFaultRun({
  title: "held calls of Python guarded functions resolved by the Python resolver's probe",
  slug: "probes-py",
  worker: { command: PYTHON, args: [path.join(ROOT, "test", "support", "guard_worker.py")], env: { ...PYTHON_ENV, FLUSH_TIMEOUT: "3" } },
  ports: { embedded: testPort(3198), servers: testPort(3199), redis: testPort(6389), postgresProxy: testPort(5489) },
  resolvers: [
    {
      name: "Python",
      holder: "py-survivor",
      start: ({ url, token, ledgerDir, servers }) =>
        startPythonResolver({
          IDEMGATE_URL: url,
          IDEMGATE_TOKEN: token,
          LEDGER_DIR: ledgerDir,
          // the sync client's resolver thread on the embedded server, AsyncIdemgate's task on Redis and PostgreSQL
          MODE: servers ? "async" : "sync",
          INTERVAL: "0.5",
          PROBE_TIMEOUT: "2",
          HOLDER: "py-survivor",
        }),
    },
  ],
});
