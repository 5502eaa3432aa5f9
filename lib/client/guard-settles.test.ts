import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { bundledScript } from "@/test/support/bundled-script";
import { ROOT } from "@/test/support/server";
import { IdemgateClient, NotAppliedError, OutcomeUnknownError, type GuardWarning } from "./index";

// guard()'s settles when the gateway cannot take them (it is restarting, the network is down): the
// caller gets its result at once with a warning, and the completion (or the release) is sent again
// in the background with the same token until the gateway takes it; flush() and close() wait for
// it, and so does a Node process that exits normally (bounded). A gateway of the test's own stands
// in here, so each answer can be chosen; test/faults/guard.test.ts kills a real one.

interface Seen {
  path: string;
  body: Record<string, unknown>;
  status: number;
}

let server: Server;
let base: string;
const seen: Seen[] = [];
/** how the fake gateway answers a settle: "down" cuts the connection, else the status it answers */
let answerSettles: (path: string, body: Record<string, unknown>) => "down" | "ok" | { status: number; type: string } | "hold" = () => "ok";
const held: (() => void)[] = [];
const EXECUTION = "0b6f5c2e-4d1a-4a8e-9a53-2f0f7f0a1b2c";

function json(res: ServerResponse, status: number, body: unknown, type = "application/json"): void {
  res.writeHead(status, { "Content-Type": type });
  res.end(JSON.stringify(body));
}

function handle(req: IncomingMessage, res: ServerResponse, text: string): void {
  const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  const url = req.url ?? "";
  if (url.endsWith("/reservations")) {
    // a lease of 300 ms: a heartbeat every 100 ms while the function runs
    return json(res, 201, { state: "reserved", executionId: EXECUTION, token: 7, leaseUntil: new Date(Date.now() + 300).toISOString(), leaseMs: 300 });
  }
  const answer = answerSettles(url, body);
  seen.push({ path: url, body, status: answer === "down" ? 0 : answer === "ok" || answer === "hold" ? 200 : answer.status });
  if (answer === "down") return void res.destroy();
  const reply = () => {
    if (url.endsWith("/complete")) return json(res, 200, { state: "done", status: body.status ?? 200, body: body.body, executionId: EXECUTION, expiresInMs: 60_000 });
    if (url.endsWith("/heartbeat")) return json(res, 200, { state: "reserved", leaseUntil: new Date(Date.now() + 300).toISOString(), leaseMs: 300 });
    return json(res, 200, { state: body.outcome === "not_run" ? "released" : "unknown" });
  };
  if (answer === "ok") return reply();
  // held: answered later, as a gateway answers a settle of a call that was settled meanwhile
  if (answer === "hold") return void held.push(() => json(res, 409, { type: "/problems/invalid_state", title: "Invalid state", status: 409 }, "application/problem+json"));
  json(res, answer.status, { type: answer.type, title: answer.type, status: answer.status }, "application/problem+json");
}

beforeAll(async () => {
  server = createServer((req, res) => {
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (text += c));
    req.on("end", () => handle(req, res, text));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

afterEach(() => {
  seen.length = 0;
  answerSettles = () => "ok";
});

const newClient = (options: Partial<ConstructorParameters<typeof IdemgateClient>[0]> = {}) =>
  new IdemgateClient({ baseUrl: base, token: "idg_test", retry: { maxAttempts: 2, baseDelayMs: 5, maxDelayMs: 10 }, flushOnExitMs: 0, ...options });
const args = { account: "acct-1", amountCents: 100, currency: "EUR" };
const completions = () => seen.filter((s) => s.path.endsWith("/complete"));

describe("guard() settles the gateway cannot take yet", () => {
  it("returns the result at once with a warning, sends the completion again with the same token until taken, and flush() waits for it", async () => {
    const client = newClient();
    let down = true;
    answerSettles = (p) => (p.endsWith("/complete") && down ? "down" : "ok");
    const warnings: GuardWarning[] = [];
    const key = `k-${randomUUID()}`;
    expect(await client.guard("ledger.record", args, () => ({ entryId: "e1" }), { key, onWarning: (w) => warnings.push(w) })).toEqual({ entryId: "e1" });
    expect(warnings.map((w) => w.kind)).toEqual(["settle_pending"]);
    expect(client.pendingSettles).toBe(1);
    // still down: the background sends it again (not only the inline attempts)
    while (completions().length < 3) await new Promise((r) => setTimeout(r, 50));
    expect(client.pendingSettles).toBe(1);
    down = false;
    await client.flush({ timeoutMs: 30_000 });
    expect(client.pendingSettles).toBe(0);
    const sent = completions();
    expect(sent.at(-1)!.status).toBe(200);
    for (const s of sent) expect(s.body).toEqual({ token: 7, status: 200, body: { entryId: "e1" } });
    expect(new Set(sent.map((s) => s.path))).toEqual(new Set([`/api/v1/executions/${EXECUTION}/complete`]));
    expect(warnings.map((w) => w.kind)).toEqual(["settle_pending"]);
    // the stored result went to the replay cache: the same call is answered without a request
    const before = seen.length;
    let ran = 0;
    expect(await client.guard("ledger.record", args, () => ++ran, { key })).toEqual({ entryId: "e1" });
    expect(ran).toBe(0);
    expect(seen.length).toBe(before);
  });

  it("sends an unknown and a not_run release again in the background; the caller gets its error at once", async () => {
    const client = newClient();
    let down = true;
    answerSettles = (p) => (p.endsWith("/release") && down ? { status: 503, type: "/problems/unavailable" } : "ok");
    const warnings: GuardWarning[] = [];
    const onWarning = (w: GuardWarning) => warnings.push(w);
    const thrown = new Error("the SDK's connection reset after sending");
    const unknown = await client.guard("ledger.record", args, () => Promise.reject(thrown), { key: `u-${randomUUID()}`, onWarning }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OutcomeUnknownError);
    const refused = new NotAppliedError("refused before sending");
    await expect(client.guard("ledger.record", args, () => Promise.reject(refused), { key: `n-${randomUUID()}`, onWarning })).rejects.toBe(refused);
    expect(warnings.map((w) => w.kind)).toEqual(["settle_pending", "settle_pending"]);
    expect(client.pendingSettles).toBe(2);
    down = false;
    await client.flush({ timeoutMs: 30_000 });
    expect(client.pendingSettles).toBe(0);
    const delivered = seen.filter((s) => s.path.endsWith("/release") && s.status === 200).map((s) => s.body.outcome);
    expect(delivered.sort()).toEqual(["not_run", "unknown"]);
  });

  it("stops at the gateway's final word in the background: a completion refused as stale is a late completion, warned once", async () => {
    const client = newClient();
    let calls = 0;
    answerSettles = (p) => (p.endsWith("/complete") ? (++calls <= 2 ? "down" : { status: 409, type: "/problems/stale_token" }) : "ok");
    const warnings: GuardWarning[] = [];
    expect(await client.guard("ledger.record", args, () => "value", { key: `s-${randomUUID()}`, onWarning: (w) => warnings.push(w) })).toBe("value");
    await client.flush({ timeoutMs: 30_000 });
    expect(client.pendingSettles).toBe(0);
    expect(warnings.map((w) => w.kind)).toEqual(["settle_pending", "late_completion"]);
    expect(completions()).toHaveLength(3);
  });

  it("flush() is bounded: what is still pending goes on in the background, and close() reports it as not stored", async () => {
    const client = newClient();
    answerSettles = (p) => (p.endsWith("/complete") ? "down" : "ok");
    const warnings: GuardWarning[] = [];
    await client.guard("ledger.record", args, () => 1, { key: `b-${randomUUID()}`, onWarning: (w) => warnings.push(w) });
    await client.flush({ timeoutMs: 300 });
    expect(client.pendingSettles).toBe(1);
    await client.close({ timeoutMs: 300 });
    expect(warnings.map((w) => w.kind)).toEqual(["settle_pending", "result_not_stored"]);
    expect(warnings[1].message).toMatch(/not delivered/);
    answerSettles = () => "ok";
    await client.flush({ timeoutMs: 30_000 });
    expect(client.pendingSettles).toBe(0);
  });

  it("says nothing of a heartbeat answer that arrives after the call was settled", async () => {
    const client = newClient();
    // the heartbeat is answered only after the completion: 409, as the gateway answers a settled call
    let heartbeats = 0;
    let answered = false;
    answerSettles = (p) => {
      if (p.endsWith("/heartbeat")) return heartbeats++ === 0 ? "hold" : "ok";
      if (p.endsWith("/complete")) {
        setTimeout(() => {
          held.splice(0).forEach((reply) => reply());
          answered = true;
        }, 0);
      }
      return "ok";
    };
    const warnings: GuardWarning[] = [];
    const heartbeatSent = async () => {
      while (heartbeats === 0) await new Promise((r) => setTimeout(r, 10));
    };
    expect(await client.guard("ledger.record", args, async () => (await heartbeatSent(), "done"), { key: `h-${randomUUID()}`, onWarning: (w) => warnings.push(w) })).toBe("done");
    // the held heartbeat got its answer after the completion's: a refusal the call no longer cares about
    while (!answered) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 100));
    expect(heartbeats).toBe(1);
    expect(warnings).toEqual([]);
  });
});

describe("a Node process exiting normally with a completion not delivered yet", () => {
  let dir: string;
  let worker: string;
  beforeAll(async () => {
    worker = await bundledScript("test/support/guard-worker.ts");
    dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-exit-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  function run(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = spawn(process.execPath, [worker], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, IDEMGATE_URL: base, IDEMGATE_TOKEN: "idg_test", KEY: `x-${randomUUID()}`, ACCOUNT: "acct-x", LEDGER: path.join(dir, `${randomUUID()}.jsonl`), MAX_ATTEMPTS: "2", ...env },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    return new Promise((resolve) => child.once("close", (code) => resolve({ code, stdout, stderr })));
  }

  it("delivers it before exiting, and says so", async () => {
    // the gateway takes completions again once the process has printed its result
    let printed = false;
    answerSettles = (p) => (p.endsWith("/complete") && !printed ? "down" : "ok");
    const child = run({ FLUSH_ON_EXIT_MS: "60000" });
    const watch = setInterval(() => {
      if (completions().length >= 2) printed = true;
    }, 20);
    const out = await child;
    clearInterval(watch);
    expect(out.code, out.stderr).toBe(0);
    expect(JSON.parse(out.stdout.trim().split("\n").at(-1)!)).toMatchObject({ outcome: "ran", body: { by: "ts" }, warnings: ["settle_pending"] });
    expect(out.stderr).toMatch(/sending them before the process exits/);
    expect(completions().at(-1)!.status).toBe(200);
  });

  it("exits after its bound when the gateway stays away, saying the result was not stored", async () => {
    answerSettles = (p) => (p.endsWith("/complete") ? "down" : "ok");
    const out = await run({ FLUSH_ON_EXIT_MS: "800" });
    expect(out.code, out.stderr).toBe(0);
    expect(out.stderr).toMatch(/result_not_stored: the result was not delivered: the process exits after 800 ms/);
  });
});
