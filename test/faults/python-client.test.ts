import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ensurePythonEnv } from "@/scripts/python-env.mjs";
import { testPort } from "@/scripts/test-ports.mjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { removeDataDir, ROOT, startServer, type RunningServer } from "@/test/support/server";
import { deleteRedisPrefix } from "@/test/support/stores";

// The Python client (clients/python) against production servers: its live tests (pytest's `live`
// mark) run with IDEMGATE_URL and IDEMGATE_TOKEN set, in the project's Python environment
// (scripts/python-env.mjs), on both configurations; and the package installs with pip into an empty
// virtualenv, offline, and works from there. Ports 3176-3177 are this file's (moved by
// IDEMGATE_TEST_PORT_BASE).

const PYTHON = process.env.PYTHON ?? "python3";
const CLIENT_DIR = path.join(ROOT, "clients", "python");

function run(command: string, args: string[], options: { env?: Record<string, string>; cwd?: string } = {}): Promise<{ code: number | null; output: string }> {
  const child = spawn(command, args, { cwd: options.cwd ?? ROOT, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...options.env } });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  // "close", not "exit": exit can come before the last of the output has been read
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, output })));
}

const PROBE_TOOL = "shop.charge_card";
const PROBE_TOOL_YAML = `
tools:
  - name: ${PROBE_TOOL}
    kind: write
    runs: client
    description: A card charge through a payment provider, guarded in the caller's process (the Python probe tests)
    inputSchema:
      type: object
      required: [orderId, amountCents]
      additionalProperties: false
      properties:
        orderId: { type: string, minLength: 1 }
        amountCents: { type: integer, minimum: 1 }
    leaseMs: 4000
    arguments: full
`;

const configurations = [
  { name: "embedded (PGlite)", port: testPort(3176), servers: false },
  { name: "Redis and PostgreSQL", port: testPort(3177), servers: true },
] as const;

describe.each(configurations)("the Python client on $name", (configuration) => {
  const prefix = `idgfault-py-${randomUUID().slice(0, 6)}`;
  const dataDir = `.data/fault-python-${configuration.port}`;
  let pg: Awaited<ReturnType<typeof createTestPostgres>> | null = null;
  let server: RunningServer;
  let token: string;

  let venvPython: string;
  let configDir: string | null = null;

  beforeAll(async () => {
    venvPython = await ensurePythonEnv({ quiet: true });
    // the probe tests' own client-run tool (test_live_probes.py): a short lease, since a probe's "not
    // applied" is taken only after the call's lease has ended, and its arguments kept in full
    configDir = await mkdtemp(path.join(os.tmpdir(), "idemgate-py-config-"));
    const config = path.join(configDir, "tools.yaml");
    await writeFile(config, PROBE_TOOL_YAML);
    const env: Record<string, string> = { IDEMGATE_RECONCILE_INTERVAL_MS: "0", IDEMGATE_CONFIG: config };
    if (configuration.servers) {
      pg = await createTestPostgres("fault_python");
      Object.assign(env, { DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix });
    }
    await removeDataDir(dataDir);
    server = await startServer({ port: configuration.port, dataDir, env });
    token = (await server.credentials()).apiToken;
  });

  afterAll(async () => {
    await server?.stop();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    await removeDataDir(dataDir);
    if (configDir) await rm(configDir, { recursive: true, force: true });
  });

  it("pytest runs the live tests and they pass, none skipped", async () => {
    const result = await run(venvPython, ["-m", "pytest", "-v", "-m", "live", "-p", "no:cacheprovider", path.join(CLIENT_DIR, "tests")], {
      cwd: CLIENT_DIR,
      env: { IDEMGATE_URL: server.url, IDEMGATE_TOKEN: token, IDEMGATE_PROBE_TOOL: PROBE_TOOL, PYTHONDONTWRITEBYTECODE: "1" },
    });
    expect(result.code, `${result.output}\n--- server ---\n${server.output()}`).toBe(0);
    expect(result.output).toMatch(/ passed/);
    expect(result.output).not.toMatch(/\b(SKIPPED|FAILED|ERROR|skipped|failed)\b/);
    expect(result.output).toMatch(/test_live\.py::LiveTest::test_threads_racing_on_one_key_run_it_once PASSED/);
    // the async client against the real server: an async def runs once per key, 50 tasks on one key run it once
    expect(result.output).toMatch(/test_live_async\.py::test_an_async_def_decorated_with_the_sync_client_runs_once_per_key PASSED/);
    expect(result.output).toMatch(/test_live_async\.py::test_fifty_concurrent_async_calls_of_one_key_run_it_once\[httpx\] PASSED/);
    // probes: a guard's own, and resolvers (threads and an asyncio task) that resolve held calls by the provider's word
    expect(result.output).toMatch(/test_live_probes\.py::test_the_resolver_resolves_held_calls_by_the_providers_word_and_retries_replay_or_run_once PASSED/);
    expect(result.output).toMatch(/test_live_probes\.py::test_resolvers_in_threads_and_an_async_task_probe_each_call_once PASSED/);
  });

  // once, on the embedded server: what it checks is the package, not the stores
  if (!configuration.servers) it("pip installs the package into an empty virtualenv offline, and it guards a call from there", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-py-venv-"));
    try {
      const venv = await run(PYTHON, ["-m", "venv", path.join(dir, "venv")]);
      expect(venv.code, venv.output).toBe(0);
      const python = path.join(dir, "venv", "bin", "python");
      const install = await run(python, ["-m", "pip", "install", "--no-index", "--no-build-isolation", CLIENT_DIR]);
      expect(install.code, install.output).toBe(0);
      const script = [
        "import idemgate, json, os, sys",
        "assert not idemgate.__file__.startswith(os.environ['CLIENT_DIR']), idemgate.__file__",
        "client = idemgate.Idemgate(os.environ['IDEMGATE_URL'], os.environ['IDEMGATE_TOKEN'])",
        "runs = []",
        "args = {'account': 'venv', 'amountCents': 1, 'currency': 'EUR'}",
        "key = os.environ['KEY']",
        "a = client.guard('ledger.record', args, lambda a: runs.append(1) or {'entry': len(runs)}, key=key)",
        "b = client.guard('ledger.record', args, lambda a: runs.append(1) or {'entry': len(runs)}, key=key)",
        "print(json.dumps({'file': idemgate.__file__, 'a': a, 'b': b, 'runs': len(runs), 'typed': os.path.exists(os.path.join(os.path.dirname(idemgate.__file__), 'py.typed'))}))",
      ].join("\n");
      // run from the temporary directory with no PYTHONPATH: only the installed copy can be imported
      const used = await run(python, ["-c", script], {
        cwd: dir,
        env: { PYTHONPATH: "", CLIENT_DIR, IDEMGATE_URL: server.url, IDEMGATE_TOKEN: token, KEY: `venv-${randomUUID()}` },
      });
      expect(used.code, used.output).toBe(0);
      const summary = JSON.parse(used.output.trim().split("\n").at(-1)!);
      expect(summary).toMatchObject({ a: { entry: 1 }, b: { entry: 1 }, runs: 1, typed: true });
      expect(summary.file).toContain(path.join(dir, "venv"));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
