import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testPort } from "@/scripts/test-ports.mjs";
import { removeDataDir, ROOT, startServer, type RunningServer } from "@/test/support/server";

// The integration examples (examples/*, walked through in docs/integrate.md) run as a user runs
// them — `tsx examples/<name>/index.ts` with IDEMGATE_URL and IDEMGATE_TOKEN — against a production
// server. Each plays a scripted agent step that calls payments.charge (on the gateway) and
// ledger.record (a local function under guard() appending to a ledger file named by
// EXAMPLE_LEDGER_FILE), fails, and is run again with the same action key: the charge and the ledger
// line must each happen once, and the retry must get the first results back.
// The Python example (`python3 examples/python/charge.py`) runs a plain retry loop around a
// decorated function that appends to a ledger file: one line, however often the step ran.
// Port 3170 is this file's (moved by IDEMGATE_TEST_PORT_BASE).

const EXAMPLES = ["ai-sdk", "openai-agents", "langchain"] as const;
const PORT = testPort(3170);
const DATA_DIR = `.data/fault-examples-${PORT}`;

interface Summary {
  example: string;
  customerId: string;
  actionKey: string;
  attempts: number;
  calls: { tool: string; key: string | null; replayed: boolean; status: number; body: { chargeId?: string; entryId?: string } }[];
  text: string;
}

let server: RunningServer;
let token: string;

function runExample(name: string, customerId: string, ledger: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const tsx = path.join(ROOT, "node_modules", "tsx", "dist", "cli.mjs");
  const child = spawn(process.execPath, [tsx, path.join("examples", name, "index.ts")], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, IDEMGATE_URL: server.url, IDEMGATE_TOKEN: token, EXAMPLE_CUSTOMER_ID: customerId, EXAMPLE_LEDGER_FILE: ledger },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d) => (stdout += d));
  child.stderr.on("data", (d) => (stderr += d));
  // "close", not "exit": exit can come before the last of stdout has been read
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
}

async function chargesOf(customerId: string): Promise<{ chargeId: string }[]> {
  const res = await fetch(`${server.url}/api/v1/tools/payments.list_charges/invoke`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ customerId }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { charges: { chargeId: string }[] }).charges;
}

describe("integration examples against a production server", () => {
  beforeAll(async () => {
    await removeDataDir(DATA_DIR);
    server = await startServer({ port: PORT, dataDir: DATA_DIR, env: { IDEMGATE_RECONCILE_INTERVAL_MS: "0" } });
    token = (await server.credentials()).apiToken;
  });

  afterAll(async () => {
    await server?.stop();
    await removeDataDir(DATA_DIR);
  });

  it.each(EXAMPLES)("%s: the step run twice charges once and books one ledger line, and the retry gets the first results back", async (name) => {
    const customerId = `cus_${name.replace(/-/g, "_")}_${randomUUID().slice(0, 8)}`;
    const dir = await mkdtemp(path.join(os.tmpdir(), `idemgate-example-${name}-`));
    try {
      await checkExample(name, customerId, path.join(dir, "ledger.jsonl"));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  async function checkExample(name: string, customerId: string, ledger: string): Promise<void> {
    const run = await runExample(name, customerId, ledger);
    expect(run.code, `${run.stderr}\n${server.output()}`).toBe(0);
    const summary = JSON.parse(run.stdout.trim().split("\n").at(-1)!) as Summary;

    expect(summary).toMatchObject({ example: name, customerId, attempts: 2 });
    const charges = summary.calls.filter((call) => call.tool === "payments.charge");
    expect(charges.map((call) => [call.status, call.replayed])).toEqual([
      [200, false],
      [200, true],
    ]);
    // one key per logical action, minted by the orchestrator and sent on both attempts
    expect(charges[0].key).toBe(`${summary.actionKey}/payments.charge`);
    expect(charges[1].key).toBe(charges[0].key);
    // the replay is the first result, byte for byte as parsed JSON
    expect(charges[1].body).toEqual(charges[0].body);

    // the side effect, counted where it happened: the demo payment provider's own table
    const made = await chargesOf(customerId);
    expect(made.map((charge) => charge.chargeId)).toEqual([charges[0].body.chargeId]);

    // the local tool under guard(): it ran on the first attempt only, the retry got its entry back
    const records = summary.calls.filter((call) => call.tool === "ledger.record");
    expect(records.map((call) => call.replayed)).toEqual([false, true]);
    expect(records[0].key).toBe(`${summary.actionKey}/ledger.record`);
    expect(records[1].key).toBe(records[0].key);
    expect(records[1].body).toEqual(records[0].body);
    // and the ledger file, where the effect happened, has one line: that entry
    const lines = (await readFile(ledger, "utf8")).trim().split("\n").map((line) => JSON.parse(line));
    expect(lines).toEqual([records[0].body]);
    expect(lines[0]).toMatchObject({ account: customerId, amountCents: 1999, currency: "EUR" });
  }

  it("python: a retry loop around a decorated function writes the ledger once; the last attempt gets the stored entry", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-example-py-"));
    try {
      const ledger = path.join(dir, "ledger.jsonl");
      const orderId = `o-${randomUUID().slice(0, 8)}`;
      const child = spawn(process.env.PYTHON ?? "python3", [path.join("examples", "python", "charge.py")], {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, PYTHONPATH: path.join(ROOT, "clients", "python"), IDEMGATE_URL: server.url, IDEMGATE_TOKEN: token, EXAMPLE_LEDGER_FILE: ledger, EXAMPLE_ORDER_ID: orderId },
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      const code = await new Promise((resolve) => child.once("close", resolve));
      expect(code, `${stderr}\n${server.output()}`).toBe(0);
      const summary = JSON.parse(stdout.trim().split("\n").at(-1)!);
      // 1: not applied (nothing charged, key released); 2: charged, then the receipt failed; 3: replayed
      expect(summary.steps.map((step: { error?: string }) => step.error ?? "ok")).toEqual(["NotAppliedError", "ConnectionError", "ok"]);
      expect(summary.sdkRuns).toBe(2);
      const lines = (await readFile(ledger, "utf8")).trim().split("\n").map((line) => JSON.parse(line));
      expect(lines).toEqual([summary.steps[2].entry]);
      expect(lines[0].orderId).toBe(orderId);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
