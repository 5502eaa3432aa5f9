import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolRequest, CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Runtime } from "@/lib/server/runtime";
import { demoTools } from "@/lib/tools/demo";
import type { TestPostgres } from "@/test/support/databases";
import { startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import { KEY_ARGUMENT, META_KEY_FIELD } from "./tools";

// Idemgate's /mcp end to end, as MCP clients see it: the App Router route (app/mcp/route.ts) behind
// a node:http server, over a real runtime (PostgreSQL key store and audit log, the demo tools), with
// the SDK's own client over Streamable HTTP and over the stdio bridge (`idemgate mcp`, a real
// process). Side effects are counted in the demo tools' own tables.

const ROOT = path.resolve(import.meta.dirname, "../..");

let gateway: McpGateway;
let pg: TestPostgres;
let runtime: Runtime;
let mcpUrl: string;
let tokenA: string;
let tokenB: string;
const clients: Client[] = [];

async function connect(token: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: "idemgate-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${token}`, ...headers } } }));
  clients.push(client);
  return client;
}

/** tools/call with params the SDK's types do not know yet (`idempotencyKey`). */
function call(client: Client, params: Record<string, unknown>): Promise<CallToolResult> {
  return client.callTool(params as CallToolRequest["params"]) as Promise<CallToolResult>;
}

const text = (result: CallToolResult) => (result.content[0] as { type: "text"; text: string }).text;
const charges = (scope: string, customerId: string) => pg.db.prisma.demoCharge.count({ where: { scope, customerId } });
const chargeArgs = (customerId: string, extra: Record<string, unknown> = {}) => ({ customerId, amountCents: 1250, currency: "EUR", ...extra });

beforeAll(async () => {
  gateway = await startMcpGateway("mcp");
  ({ pg, runtime, url: mcpUrl } = gateway);
  tokenA = await gateway.token("tenant-a");
  tokenB = await gateway.token("tenant-b");
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await gateway?.close();
});

describe("Idemgate's MCP server over Streamable HTTP", () => {
  it("refuses a client without an API token (401) and one with an unknown token", async () => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} });
    const headers = { "Content-Type": "application/json", Accept: "application/json, text/event-stream" };
    const none = await fetch(mcpUrl, { method: "POST", headers, body });
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
    const unknown = await fetch(mcpUrl, { method: "POST", headers: { ...headers, Authorization: "Bearer idg_nope" }, body });
    expect(unknown.status).toBe(401);
    await expect(connect("idg_nope")).rejects.toThrow();
  });

  it("initializes: names itself and tells the client how to send keys", async () => {
    const client = await connect(tokenA);
    expect(client.getServerVersion()).toMatchObject({ name: "idemgate" });
    expect(client.getServerCapabilities()?.tools).toBeDefined();
    expect(client.getInstructions()).toContain("idempotencyKey");
  });

  it("lists every tool with its schema, description and annotations; writes advertise an optional idempotency_key", async () => {
    const client = await connect(tokenA);
    const { tools } = await client.listTools();
    // a tool run by its caller (runs: client) cannot be called here, so it is not listed
    expect(tools.map((t) => t.name).sort()).toEqual(demoTools.filter((t) => t.runs !== "client").map((t) => t.name).sort());
    for (const tool of tools) {
      const definition = demoTools.find((t) => t.name === tool.name)!;
      expect(tool.description).toContain(definition.description);
      expect(tool.inputSchema.type).toBe("object");
      if (definition.kind === "read") {
        expect(tool.annotations).toMatchObject({ readOnlyHint: true });
        expect(tool.inputSchema.properties ?? {}).not.toHaveProperty(KEY_ARGUMENT);
      } else {
        expect(tool.annotations).toMatchObject({ readOnlyHint: false, idempotentHint: false, destructiveHint: true });
        expect(tool.inputSchema.properties).toHaveProperty(KEY_ARGUMENT, expect.objectContaining({ type: "string" }));
        expect(tool.inputSchema.required ?? []).not.toContain(KEY_ARGUMENT);
      }
    }
    const charge = tools.find((t) => t.name === "payments.charge")!;
    expect(charge.inputSchema.required).toEqual(expect.arrayContaining(["customerId", "amountCents", "currency"]));
    expect(charge._meta).toMatchObject({ "io.idemgate/kind": "write", "io.idemgate/idempotency-key": "required" });
  });

  it("runs one write called 5 times at once with one idempotencyKey once; every call gets the same content", async () => {
    const client = await connect(tokenA);
    const key = `mcp-${randomUUID()}`;
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    // the first call takes a while: the others arrive while it runs, wait for it and get its result
    const args = chargeArgs(customerId, { simulate: { latencyMs: 400 } });
    const results = await Promise.all(Array.from({ length: 5 }, () => call(client, { name: "payments.charge", arguments: args, idempotencyKey: key })));
    for (const result of results) {
      expect(result.isError).toBeFalsy();
      expect(text(result)).toBe(text(results[0]));
      expect(result.structuredContent).toEqual(JSON.parse(text(results[0])));
    }
    expect(JSON.parse(text(results[0]))).toMatchObject({ customerId, amountCents: 1250, currency: "EUR", chargeId: expect.stringMatching(/^ch_/) });
    const replayed = results.map((r) => (r._meta?.["io.idemgate/result"] as { replayed: boolean }).replayed).sort();
    expect(replayed).toEqual([false, true, true, true, true]);

    expect(await charges("tenant-a", customerId)).toBe(1);
    const listed = await call(client, { name: "payments.list_charges", arguments: { customerId } });
    expect((listed.structuredContent as { charges: unknown[] }).charges).toHaveLength(1);

    // audited like HTTP calls, with the transport: one execution and four suppressions over mcp
    await runtime.audit.flush();
    const executions = await pg.db.prisma.execution.findMany({ where: { scope: "tenant-a", key } });
    expect(executions).toEqual([expect.objectContaining({ tool: "payments.charge", transport: "mcp", outcome: "succeeded" })]);
    const suppressions = await pg.db.prisma.suppression.findMany({ where: { scope: "tenant-a", key } });
    expect(suppressions).toHaveLength(4);
    expect(new Set(suppressions.map((s) => s.transport))).toEqual(new Set(["mcp"]));
  });

  it("refuses a keyless write with a tool error saying how to send a key; nothing runs", async () => {
    const client = await connect(tokenA);
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const result = await call(client, { name: "payments.charge", arguments: chargeArgs(customerId) });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ type: "/problems/missing_key" });
    expect(text(result)).toContain("params.idempotencyKey");
    expect(text(result)).toContain(KEY_ARGUMENT);
    expect(text(result)).toContain("nothing was run");
    expect(await charges("tenant-a", customerId)).toBe(0);
  });

  it("never replays one token's result to another token's scope", async () => {
    const a = await connect(tokenA);
    const b = await connect(tokenB);
    const key = `shared-${randomUUID()}`;
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const first = await call(a, { name: "payments.charge", arguments: chargeArgs(customerId), idempotencyKey: key });
    const other = await call(b, { name: "payments.charge", arguments: chargeArgs(customerId), idempotencyKey: key });
    expect(other.isError).toBeFalsy();
    expect(other._meta?.["io.idemgate/result"]).toMatchObject({ replayed: false });
    expect((other.structuredContent as { chargeId: string }).chargeId).not.toBe((first.structuredContent as { chargeId: string }).chargeId);
    expect(await charges("tenant-a", customerId)).toBe(1);
    expect(await charges("tenant-b", customerId)).toBe(1);
    // and tenant b's reads never see tenant a's charge
    const listed = await call(b, { name: "payments.list_charges", arguments: { customerId } });
    expect((listed.structuredContent as { charges: { chargeId: string }[] }).charges.map((c) => c.chargeId)).toEqual([
      (other.structuredContent as { chargeId: string }).chargeId,
    ]);
  });

  it(`takes the key from _meta["${META_KEY_FIELD}"] and from the POST's Idempotency-Key header`, async () => {
    const client = await connect(tokenA);
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const metaKey = `meta-${randomUUID()}`;
    const viaMeta = () => call(client, { name: "payments.charge", arguments: chargeArgs(customerId), _meta: { [META_KEY_FIELD]: metaKey } });
    const [m1, m2] = [await viaMeta(), await viaMeta()];
    expect(text(m2)).toBe(text(m1));
    expect(m2._meta?.["io.idemgate/result"]).toMatchObject({ key: metaKey, replayed: true });
    expect(await charges("tenant-a", customerId)).toBe(1);

    const headerKey = `header-${randomUUID()}`;
    const withHeader = await connect(tokenA, { "Idempotency-Key": headerKey });
    const h1 = await call(withHeader, { name: "payments.charge", arguments: chargeArgs(customerId, { amountCents: 99 }) });
    const h2 = await call(withHeader, { name: "payments.charge", arguments: chargeArgs(customerId, { amountCents: 99 }) });
    expect(h1.isError).toBeFalsy();
    expect(text(h2)).toBe(text(h1));
    expect(h2._meta?.["io.idemgate/result"]).toMatchObject({ key: headerKey, replayed: true });
    expect(await charges("tenant-a", customerId)).toBe(2);
  });

  it("params.idempotencyKey wins over the idempotency_key argument, which is removed before validation", async () => {
    const client = await connect(tokenA);
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const key = `both-${randomUUID()}`;
    const first = await call(client, { name: "payments.charge", arguments: { ...chargeArgs(customerId), [KEY_ARGUMENT]: "model-1" }, idempotencyKey: key });
    const again = await call(client, { name: "payments.charge", arguments: { ...chargeArgs(customerId), [KEY_ARGUMENT]: "model-2" }, idempotencyKey: key });
    expect(first.isError).toBeFalsy();
    expect(again._meta?.["io.idemgate/result"]).toMatchObject({ key, replayed: true });
    expect(await charges("tenant-a", customerId)).toBe(1);
  });

  it("treats a model's idempotency_key argument as advisory: three fresh keys for identical arguments within the window make one charge", async () => {
    const client = await connect(tokenA);
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const results: CallToolResult[] = [];
    for (const n of [1, 2, 3]) {
      results.push(await call(client, { name: "payments.charge", arguments: { ...chargeArgs(customerId), [KEY_ARGUMENT]: `model-key-${n}-${randomUUID()}` } }));
    }
    for (const result of results) {
      expect(result.isError).toBeFalsy();
      expect(text(result)).toBe(text(results[0]));
    }
    expect(await charges("tenant-a", customerId)).toBe(1);
    await runtime.audit.flush();
    const kinds = await pg.db.prisma.suppression.findMany({ where: { scope: "tenant-a", tool: "payments.charge", transport: "mcp", kind: "fresh_key" } });
    expect(kinds.length).toBeGreaterThanOrEqual(2);
    // a model's key that is reused is still a replay of its own action
    const key = `model-reused-${randomUUID()}`;
    const other = chargeArgs(customerId, { amountCents: 7 });
    await call(client, { name: "payments.charge", arguments: { ...other, [KEY_ARGUMENT]: key } });
    const replay = await call(client, { name: "payments.charge", arguments: { ...other, [KEY_ARGUMENT]: key } });
    expect(replay._meta?.["io.idemgate/result"]).toMatchObject({ key, replayed: true });
    expect(await charges("tenant-a", customerId)).toBe(2);
  });

  it("answers a final error (a declined card) as a tool error with its body, stored and replayed", async () => {
    const client = await connect(tokenA);
    const key = `decline-${randomUUID()}`;
    const args = chargeArgs(`cus_${randomUUID().slice(0, 8)}`, { simulate: { outcome: "decline" } });
    const first = await call(client, { name: "payments.charge", arguments: args, idempotencyKey: key });
    expect(first.isError).toBe(true);
    expect(first.structuredContent).toMatchObject({ status: 402, code: "card_declined" });
    const again = await call(client, { name: "payments.charge", arguments: args, idempotencyKey: key });
    expect(again.isError).toBe(true);
    expect(text(again)).toBe(text(first));
    expect(again._meta?.["io.idemgate/result"]).toMatchObject({ replayed: true, status: 402 });
  });

  it("holds a duplicate of a running call like Prefer: wait, then says it is in progress; nothing runs twice", async () => {
    const waitsOneSecond = await connect(tokenA, { Prefer: "wait=1" });
    const client = await connect(tokenA);
    const key = `slow-${randomUUID()}`;
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const args = chargeArgs(customerId, { simulate: { latencyMs: 2_500 } });
    const slow = call(client, { name: "payments.charge", arguments: args, idempotencyKey: key });
    await new Promise((r) => setTimeout(r, 300));
    const started = Date.now();
    const duplicate = await call(waitsOneSecond, { name: "payments.charge", arguments: args, idempotencyKey: key });
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(duplicate.isError).toBe(true);
    expect(duplicate.structuredContent).toMatchObject({ type: "/problems/conflict", key, retry: "after Retry-After" });
    expect(text(duplicate)).toContain("in progress");
    const first = await slow;
    expect(first.isError).toBeFalsy();
    // the default wait (10 s) covers a call of a few seconds: a duplicate then gets the result
    const late = await call(client, { name: "payments.charge", arguments: args, idempotencyKey: key });
    expect(text(late)).toBe(text(first));
    expect(await charges("tenant-a", customerId)).toBe(1);
  });

  it("says an unknown outcome may have happened and holds the key: a retry does not run it again", async () => {
    const client = await connect(tokenA);
    const key = `unknown-${randomUUID()}`;
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const args = chargeArgs(customerId, { simulate: { outcome: "throw_after_effect" } });
    const first = await call(client, { name: "payments.charge", arguments: args, idempotencyKey: key });
    expect(first.isError).toBe(true);
    expect(first.structuredContent).toMatchObject({ type: "/problems/outcome_unknown", key, state: "unknown", retry: "no" });
    expect(text(first)).toContain("may have happened");
    expect(text(first)).toContain("key is held");
    const retry = await call(client, { name: "payments.charge", arguments: args, idempotencyKey: key });
    expect(retry.isError).toBe(true);
    expect(retry.structuredContent).toMatchObject({ type: "/problems/outcome_unknown", state: "unknown" });
    expect(text(retry)).toContain("may have happened");
    expect(await charges("tenant-a", customerId)).toBe(1);
  });

  it("reports invalid arguments as a tool error (nothing runs) and an unknown tool as a protocol error", async () => {
    const client = await connect(tokenA);
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const invalid = await call(client, { name: "payments.charge", arguments: { customerId, amountCents: -5, currency: "eur" }, idempotencyKey: randomUUID() });
    expect(invalid.isError).toBe(true);
    expect(invalid.structuredContent).toMatchObject({ type: "/problems/invalid_arguments", errors: expect.arrayContaining([expect.objectContaining({ path: "amountCents" })]) });
    const key = await call(client, { name: "payments.charge", arguments: chargeArgs(customerId), idempotencyKey: 42 });
    expect(key.structuredContent).toMatchObject({ type: "/problems/invalid_key" });
    expect(await charges("tenant-a", customerId)).toBe(0);
    await expect(call(client, { name: "payments.nope", arguments: {} })).rejects.toThrow(/Unknown tool: payments\.nope/);
  });

  it("refuses a tool that runs in its caller's process with a tool error naming how it runs; nothing is reserved", async () => {
    const client = await connect(tokenA);
    const key = randomUUID();
    const refused = await call(client, { name: "ledger.record", arguments: { account: "acct-1", amountCents: 100, currency: "EUR" }, idempotencyKey: key });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ type: "/problems/runs_in_client", status: 400 });
    expect(text(refused)).toMatch(/reservations/);
    expect(await runtime.store.get("tenant-a", key)).toBeNull();
  });

  it("answers GET (no server-initiated stream in stateless mode) and DELETE with 405", async () => {
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(mcpUrl, { method, headers: { Authorization: `Bearer ${tokenA}`, Accept: "text/event-stream" } });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("POST");
    }
  });

  it("works without initialize (stateless): a bare tools/call POST with the key as a header", async () => {
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const key = `bare-${randomUUID()}`;
    const post = () =>
      fetch(mcpUrl, {
        method: "POST",
        headers: { Authorization: `Bearer ${tokenA}`, "Content-Type": "application/json", Accept: "application/json, text/event-stream", "Idempotency-Key": key },
        body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "payments.charge", arguments: chargeArgs(customerId) } }),
      }).then(async (res) => ({ status: res.status, body: await res.json() }));
    const first = await post();
    const second = await post();
    expect(first).toMatchObject({ status: 200, body: { jsonrpc: "2.0", id: 7, result: { content: [{ type: "text" }] } } });
    expect(second.body.result.content).toEqual(first.body.result.content);
    expect(await charges("tenant-a", customerId)).toBe(1);
  });

  it("refuses integers JSON would round, before anything runs", async () => {
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const res = await fetch(mcpUrl, {
      method: "POST",
      headers: { Authorization: `Bearer ${tokenA}`, "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
      body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"payments.charge","idempotencyKey":"big","arguments":{"customerId":"${customerId}","amountCents":9007199254740993,"currency":"EUR"}}}`,
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: -32602, message: expect.stringContaining("amountCents") } });
    expect(await charges("tenant-a", customerId)).toBe(0);
  });
});

// each case launches the bridge (tsx compiles the CLI at start): seconds on a busy machine
describe("the stdio bridge (idemgate mcp)", { timeout: 90_000 }, () => {
  async function launch(token: string): Promise<{ client: Client; stderr: () => string }> {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [path.join(ROOT, "bin", "idemgate.mjs"), "mcp", "--url", mcpUrl, "--token", token],
      cwd: ROOT,
      env: { ...(process.env as Record<string, string>), DATABASE_URL: "", REDIS_URL: "" },
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (chunk) => (stderr += chunk));
    const client = new Client({ name: "idemgate-test-stdio", version: "1.0.0" });
    await client.connect(transport);
    clients.push(client);
    return { client, stderr: () => stderr };
  }

  it("passes list and calls through: 5 calls with one idempotencyKey make one charge and the same content", async () => {
    const { client, stderr } = await launch(tokenA);
    expect(client.getServerVersion()).toMatchObject({ name: "idemgate" });
    expect(client.getInstructions()).toContain("idempotencyKey");
    const { tools } = await client.listTools();
    expect(tools.find((t) => t.name === "payments.list_charges")?.annotations).toMatchObject({ readOnlyHint: true });
    expect(tools.find((t) => t.name === "payments.charge")?.inputSchema.properties).toHaveProperty(KEY_ARGUMENT);

    const key = `stdio-${randomUUID()}`;
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const results = await Promise.all(
      Array.from({ length: 5 }, () => call(client, { name: "payments.charge", arguments: chargeArgs(customerId, { simulate: { latencyMs: 200 } }), idempotencyKey: key })),
    );
    for (const result of results) expect(text(result)).toBe(text(results[0]));
    expect(await charges("tenant-a", customerId)).toBe(1);

    // _meta passes through too
    const metaKey = `stdio-meta-${randomUUID()}`;
    const viaMeta = () => call(client, { name: "payments.charge", arguments: chargeArgs(customerId, { amountCents: 3 }), _meta: { [META_KEY_FIELD]: metaKey } });
    const m1 = await viaMeta();
    const m2 = await viaMeta();
    expect(text(m2)).toBe(text(m1));
    expect(await charges("tenant-a", customerId)).toBe(2);

    const keyless = await call(client, { name: "payments.charge", arguments: chargeArgs(customerId, { amountCents: 4 }) });
    expect(keyless.isError).toBe(true);
    expect(text(keyless)).toContain("params.idempotencyKey");
    expect(await charges("tenant-a", customerId)).toBe(2);
    await expect(call(client, { name: "payments.nope", arguments: {} })).rejects.toThrow(/Unknown tool/);
    expect(stderr()).toContain("forwarding MCP");
  });

  it("keeps another token's scope apart", async () => {
    const { client } = await launch(tokenB);
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const key = `stdio-b-${randomUUID()}`;
    const a = await connect(tokenA);
    const fromA = await call(a, { name: "payments.charge", arguments: chargeArgs(customerId), idempotencyKey: key });
    const fromB = await call(client, { name: "payments.charge", arguments: chargeArgs(customerId), idempotencyKey: key });
    expect(fromB._meta?.["io.idemgate/result"]).toMatchObject({ replayed: false });
    expect(text(fromB)).not.toBe(text(fromA));
    expect(await charges("tenant-b", customerId)).toBe(1);
  });

  it("writes nothing but protocol to stdout, and says on stderr why it cannot start", async () => {
    /** Sends `input`, and ends stdin (the client goes away) once `answers` lines came back, or after 20 s. */
    const run = (args: string[], input: string, answers: number) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
        const child = spawn(process.execPath, [path.join(ROOT, "bin", "idemgate.mjs"), "mcp", ...args], { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"] });
        let stdout = "";
        let stderr = "";
        const timer = setTimeout(() => child.stdin.end(), 20_000);
        child.stdout.on("data", (c) => {
          stdout += c;
          if (stdout.split("\n").length > answers) child.stdin.end();
        });
        child.stderr.on("data", (c) => (stderr += c));
        child.on("error", reject);
        child.on("close", (code) => {
          clearTimeout(timer);
          resolve({ code, stdout, stderr });
        });
        child.stdin.write(input);
      });
    const init = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } } };
    const list = { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} };
    const ok = await run(["--url", mcpUrl, "--token", tokenA], `${JSON.stringify(init)}\n${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n${JSON.stringify(list)}\n`, 2);
    const lines = ok.stdout.split("\n").filter(Boolean);
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({ jsonrpc: "2.0", id: 1, result: expect.objectContaining({ serverInfo: expect.objectContaining({ name: "idemgate" }) }) }),
      expect.objectContaining({ jsonrpc: "2.0", id: 2, result: expect.objectContaining({ tools: expect.any(Array) }) }),
    ]);
    expect(ok.code).toBe(0);

    const refused = await run(["--url", mcpUrl, "--token", "idg_wrong"], "", 1);
    expect(refused.stdout).toBe("");
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(`cannot reach Idemgate's MCP endpoint at ${mcpUrl}`);
  });
});
