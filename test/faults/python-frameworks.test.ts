import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { ensurePythonEnv } from "@/scripts/python-env.mjs";
import { testPort } from "@/scripts/test-ports.mjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { removeDataDir, ROOT, startServer, type RunningServer } from "@/test/support/server";

// The Python client inside the frameworks agents run on, each the real package from the project's
// Python environment (scripts/python-env.mjs: mcp, openai), against a production server: an MCP
// server written with the MCP Python SDK retried by the SDK's own client, an agent loop on the openai
// SDK against a scripted chat-completions server (a re-emitted tool call, an answer that never comes
// so the SDK retries), a plain asyncio job runner with its own retries; and the Python snippets of
// clients/python/README.md and docs/integrate.md (fenced as ```python runnable), run as written.
// Each side effect is one line appended to a ledger file: the lines counted are the effects.
// Port 3197 is this file's (moved by IDEMGATE_TEST_PORT_BASE).

const PORT = testPort(3197);
const DATA_DIR = `.data/fault-pyframeworks-${PORT}`;

let server: RunningServer;
let token: string;
let python: string;
let dir: string;

function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(python, args, {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, IDEMGATE_URL: server.url, IDEMGATE_TOKEN: token, PYTHONDONTWRITEBYTECODE: "1", ...env },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  // "close", not "exit": exit can come before the last of stdout has been read
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
}

/** the last line of a script's stdout, parsed; the script must have exited 0 */
function summaryOf(result: { code: number | null; stdout: string; stderr: string }): Record<string, unknown> {
  expect(result.code, `${result.stdout}\n${result.stderr.slice(-4000)}`).toBe(0);
  return JSON.parse(result.stdout.trim().split("\n").at(-1)!) as Record<string, unknown>;
}

async function ledgerLines(file: string): Promise<Record<string, unknown>[]> {
  const text = await readFile(file, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

async function keyState(key: string): Promise<string> {
  const res = await fetch(`${server.url}/api/v1/keys/demo/${encodeURIComponent(key)}`, { headers: { authorization: `Bearer ${token}` } });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { record?: { state: string }; state?: string };
  return body.record?.state ?? body.state ?? "";
}

describe("the Python client in agent frameworks, against a production server", () => {
  beforeAll(async () => {
    python = await ensurePythonEnv({ quiet: true });
    dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-pyframeworks-"));
    await removeDataDir(DATA_DIR);
    server = await startServer({ port: PORT, dataDir: DATA_DIR, env: { IDEMGATE_RECONCILE_INTERVAL_MS: "0" } });
    token = (await server.credentials()).apiToken;
  });

  afterAll(async () => {
    await server?.stop();
    await removeDataDir(DATA_DIR);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("an MCP server on the MCP Python SDK: the SDK's client times out, retries with the key, and retries again from a new session with the key in _meta; one entry", async () => {
    const ledger = path.join(dir, "mcp.jsonl");
    const out = summaryOf(
      await run([path.join("test", "support", "mcp_retry_client.py")], { EXAMPLE_LEDGER_FILE: ledger, EXAMPLE_SLOW_ACCOUNT: "acct-slow", EXAMPLE_SLOW_SECONDS: "3" }),
    ) as { keys: string[]; first: string; retry: { entryId: string }; meta: { entryId: string }; second: { entryId: string }; keyless: { error: string } };
    expect(out.first).toMatch(/^timed out/);
    expect(out.retry.entryId).toMatch(/^ent_/);
    expect(out.meta).toEqual(out.retry);
    expect(out.second.entryId).not.toBe(out.retry.entryId);
    expect(out.keyless.error).toMatch(/needs an idempotency key/);
    const lines = await ledgerLines(ledger);
    expect(lines.map((l) => l.entryId).sort()).toEqual([out.retry.entryId, out.second.entryId].sort());
    for (const key of out.keys) expect(await keyState(key)).toBe("done");
  });

  it("an agent loop on the openai SDK keyed from the run: a re-emitted call and the SDK's own retry book nothing twice, nor does the run started over", async () => {
    const ledger = path.join(dir, "openai.jsonl");
    const model = spawn(python, [path.join(ROOT, "test", "support", "fake_chat_completions.py")], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let text = "";
        model.stdout.on("data", (d) => {
          text += d;
          if (text.includes("\n")) resolve(Number(text.split("\n")[0]));
        });
        model.once("close", (code) => reject(new Error(`the scripted model exited ${code}`)));
      });
      const base = `http://127.0.0.1:${port}`;
      const runId = `run-${randomUUID()}`;
      const env = { EXAMPLE_LEDGER_FILE: ledger, EXAMPLE_RUN_ID: runId, OPENAI_BASE_URL: `${base}/v1`, OPENAI_API_KEY: "sk-local", OPENAI_TIMEOUT: "3" };
      type Run = { calls: { toolCallId: string; key: string; entryId: string }[]; functionRuns: number; text: string };
      const first = summaryOf(await run([path.join("examples", "python", "openai_agent.py")], env)) as unknown as Run;
      const stats = (await (await fetch(`${base}/stats`)).json()) as { requests: number; held: number; toolCallIds: string[] };
      // the answer held unanswered was asked for again by the SDK itself (the run finished after it);
      // at least the 4 answered requests and the held one (a slow machine may time out more of them)
      expect(stats.held).toBe(1);
      expect(stats.requests).toBeGreaterThanOrEqual(5);
      expect(first.text).toBe("Booked both entries.");
      expect(first.calls).toHaveLength(3);
      const [a, reemitted, b] = first.calls;
      expect(reemitted.toolCallId).not.toBe(a.toolCallId);
      expect(reemitted.key).toBe(a.key);
      expect(reemitted.entryId).toBe(a.entryId);
      expect(b.key).not.toBe(a.key);
      expect(first.functionRuns).toBe(2);
      // the whole run again with the same run id, as after a crash: every call replayed
      const again = summaryOf(await run([path.join("examples", "python", "openai_agent.py")], env)) as unknown as Run;
      expect(again.functionRuns).toBe(0);
      expect(again.calls.map((c) => c.entryId)).toEqual(first.calls.map((c) => c.entryId));
      expect(again.calls.map((c) => c.toolCallId)).not.toEqual(first.calls.map((c) => c.toolCallId));
      const lines = await ledgerLines(ledger);
      expect(lines.map((l) => l.account).sort()).toEqual(["acct-A", "acct-B"]);
    } finally {
      model.kill("SIGTERM");
    }
  });

  it("an asyncio job runner retrying on timeouts: one booking per job; the job cut off mid-booking is held, not booked again", async () => {
    const ledger = path.join(dir, "jobs.jsonl");
    const batch = randomUUID().slice(0, 8);
    const out = summaryOf(await run([path.join("examples", "python", "job_runner.py")], { EXAMPLE_LEDGER_FILE: ledger, EXAMPLE_BATCH_ID: batch, EXAMPLE_JOB_TIMEOUT: "6" })) as {
      jobs: { job: string; attempts: number; outcome: string; entry?: { entryId: string } }[];
    };
    expect(out.jobs.map(({ job, attempts, outcome }) => ({ job, attempts, outcome }))).toEqual([
      { job: "job-1", attempts: 1, outcome: "done" },
      { job: "job-2", attempts: 2, outcome: "done" },
      { job: "job-3", attempts: 2, outcome: "held: an operator decides" },
    ]);
    const lines = await ledgerLines(ledger);
    expect(lines.map((l) => l.job).sort()).toEqual(["job-1", "job-2", "job-3"]);
    expect(lines.find((l) => l.job === "job-2")?.entryId).toBe(out.jobs[1].entry?.entryId);
    expect(await keyState(`job-${batch}-job-2`)).toBe("done");
    expect(await keyState(`job-${batch}-job-3`)).toBe("unknown");
  });

  const DOCS = ["clients/python/README.md", "docs/integrate.md"];

  it.each(DOCS)("the Python snippets of %s run as written", async (doc) => {
    const text = await readFile(path.join(ROOT, doc), "utf8");
    const snippets = [...text.matchAll(/^```python runnable\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
    expect(snippets.length).toBeGreaterThan(0);
    for (const [i, snippet] of snippets.entries()) {
      const file = path.join(dir, `${path.basename(doc, ".md")}-${i}.py`);
      await writeFile(file, snippet);
      // the URL as `npm start` serves it by default is the snippet's fallback: the test's server is elsewhere
      const result = await run([file]);
      expect(result.code, `snippet ${i} of ${doc}:\n${snippet}\n${result.stdout}\n${result.stderr.slice(-4000)}`).toBe(0);
      expect(result.stdout).toMatch(/entryId/);
    }
  });
});
