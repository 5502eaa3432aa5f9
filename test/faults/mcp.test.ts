import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolRequest, CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testPort } from "@/scripts/test-ports.mjs";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { ROOT, removeDataDir, startServer, type RunningServer } from "@/test/support/server";
import { deleteRedisPrefix } from "@/test/support/stores";

// /mcp in the production server (scripts/serve.mjs, as `npm start` runs it), on both configurations:
// - Redis + PostgreSQL: the SDK's client over Streamable HTTP and through the stdio bridge, a server
//   process killed in the middle of a call (side effects counted in the demo tools' own tables);
// - embedded (nothing configured: PGlite for keys and audit, as a first `npm start`): the SDK's
//   client, and the MCP Inspector's CLI as a client nobody here wrote (side effects counted through
//   payments.list_charges: the embedded database belongs to the server process).
// lib/mcp/mcp.test.ts runs the SQL store in-process. Ports 3141–3149 and 3162–3163 are this file's (moved by IDEMGATE_TEST_PORT_BASE).

type Pg = Awaited<ReturnType<typeof createTestPostgres>>;

const text = (result: CallToolResult) => (result.content[0] as { text: string }).text;
const call = (client: Client, params: Record<string, unknown>) => client.callTool(params as CallToolRequest["params"]) as Promise<CallToolResult>;
const chargeArgs = (customerId: string, extra: Record<string, unknown> = {}) => ({ customerId, amountCents: 4200, currency: "EUR", ...extra });

describe("MCP against a production server", () => {
  const dataDir = ".data/fault-mcp";
  const prefix = `idgfault-mcp-${randomUUID().slice(0, 6)}`;
  let pg: Pg;
  let server: RunningServer;
  let env: Record<string, string>;
  let token: string;
  const clients: Client[] = [];
  const charges = (customerId: string) => pg.db.prisma.demoCharge.count({ where: { customerId } });

  async function httpClient(): Promise<Client> {
    const client = new Client({ name: "fault-suite", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    clients.push(client);
    return client;
  }

  beforeAll(async () => {
    pg = await createTestPostgres("fault_mcp");
    await removeDataDir(dataDir);
    env = { DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix, IDEMGATE_RECONCILE_INTERVAL_MS: "0", IDEMGATE_DEMO_LEASE_MS: "4000" };
    server = await startServer({ port: testPort(3141), dataDir, env });
    token = (await server.credentials()).apiToken;
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await server?.stop();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    await removeDataDir(dataDir);
  });

  it("over Streamable HTTP: lists with annotations, runs five calls with one key once, refuses a keyless write", async () => {
    const client = await httpClient();
    const { tools } = await client.listTools();
    expect(tools.find((t) => t.name === "payments.list_charges")?.annotations).toMatchObject({ readOnlyHint: true });
    expect(tools.find((t) => t.name === "payments.charge")?.inputSchema.properties).toHaveProperty("idempotency_key");

    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const key = `fault-mcp-${randomUUID()}`;
    const args = chargeArgs(customerId, { simulate: { latencyMs: 300 } });
    const results = await Promise.all(Array.from({ length: 5 }, () => call(client, { name: "payments.charge", arguments: args, idempotencyKey: key })));
    for (const result of results) expect(text(result)).toBe(text(results[0]));
    expect(await charges(customerId)).toBe(1);

    const keyless = await call(client, { name: "payments.charge", arguments: chargeArgs(customerId, { amountCents: 1 }) });
    expect(keyless.isError).toBe(true);
    expect(text(keyless)).toContain("params.idempotencyKey");
    expect(await charges(customerId)).toBe(1);
  });

  it("through the stdio bridge: the same key replays what the HTTP client got", async () => {
    const http = await httpClient();
    const stdio = new Client({ name: "fault-suite-stdio", version: "1.0.0" });
    await stdio.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [path.join(ROOT, "bin", "idemgate.mjs"), "mcp", "--url", server.url, "--token", token],
        cwd: ROOT,
        stderr: "ignore",
      }),
    );
    clients.push(stdio);
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const key = `fault-mcp-stdio-${randomUUID()}`;
    const first = await call(http, { name: "payments.charge", arguments: chargeArgs(customerId), idempotencyKey: key });
    const again = await call(stdio, { name: "payments.charge", arguments: chargeArgs(customerId), idempotencyKey: key });
    expect(text(again)).toBe(text(first));
    expect(again._meta?.["io.idemgate/result"]).toMatchObject({ replayed: true });
    expect(await charges(customerId)).toBe(1);
  });

  it("a server killed while a call runs: the client's retry with the same key after the restart does not charge twice", async () => {
    const client = await httpClient();
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const key = `fault-mcp-kill-${randomUUID()}`;
    const args = chargeArgs(customerId, { simulate: { afterEffectMs: 3_000 } });
    const lost = call(client, { name: "payments.charge", arguments: args, idempotencyKey: key }).catch((err: Error) => err);
    const deadline = Date.now() + 20_000;
    while ((await charges(customerId)) === 0) {
      if (Date.now() > deadline) throw new Error("the charge was not committed");
      await new Promise((r) => setTimeout(r, 100));
    }
    await server.kill();
    expect(await lost).toBeInstanceOf(Error);

    server = await startServer({ port: testPort(3141), dataDir, env });
    const retry = await call(await httpClient(), { name: "payments.charge", arguments: args, idempotencyKey: key });
    // the key is held (in progress until its lease ends, then stuck): never run again by itself
    expect(retry.isError).toBe(true);
    expect(retry.structuredContent).toMatchObject({ key, type: expect.stringMatching(/^\/problems\/(conflict|stuck)$/) });
    expect(await charges(customerId)).toBe(1);
  });
});

describe("MCP against a production server on the embedded database (PGlite)", () => {
  const dataDir = ".data/fault-mcp-embedded";
  let server: RunningServer;
  let token: string;
  const clients: Client[] = [];

  async function httpClient(): Promise<Client> {
    const client = new Client({ name: "fault-suite-embedded", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    clients.push(client);
    return client;
  }
  async function charges(client: Client, customerId: string): Promise<{ chargeId: string }[]> {
    const listed = await call(client, { name: "payments.list_charges", arguments: { customerId } });
    expect(listed.isError).toBeFalsy();
    return (listed.structuredContent as { charges: { chargeId: string }[] }).charges;
  }

  beforeAll(async () => {
    await removeDataDir(dataDir);
    // no DATABASE_URL, no REDIS_URL (startServer blanks both): the embedded default
    server = await startServer({ port: testPort(3162), dataDir, env: { IDEMGATE_RECONCILE_INTERVAL_MS: "0" } });
    token = (await server.credentials()).apiToken;
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await server?.stop();
    await removeDataDir(dataDir);
  });

  it("initializes, lists with annotations, runs five calls with one key once with identical content, refuses a keyless write", async () => {
    const client = await httpClient();
    expect(client.getServerVersion()?.name).toBe("idemgate");
    const { tools } = await client.listTools();
    expect(tools.find((t) => t.name === "payments.list_charges")?.annotations).toMatchObject({ readOnlyHint: true });
    expect(tools.find((t) => t.name === "payments.charge")?.inputSchema.properties).toHaveProperty("idempotency_key");

    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const key = `fault-mcp-embedded-${randomUUID()}`;
    const args = chargeArgs(customerId, { simulate: { latencyMs: 300 } });
    const results = await Promise.all(Array.from({ length: 5 }, () => call(client, { name: "payments.charge", arguments: args, idempotencyKey: key })));
    for (const result of results) {
      expect(result.isError).toBeFalsy();
      expect(result.content).toEqual(results[0].content);
    }
    const made = await charges(client, customerId);
    expect(made).toHaveLength(1);
    expect(JSON.parse(text(results[0]))).toMatchObject({ chargeId: made[0].chargeId });

    const keyless = await call(client, { name: "payments.charge", arguments: chargeArgs(customerId, { amountCents: 1 }) });
    expect(keyless.isError).toBe(true);
    expect(text(keyless)).toContain("params.idempotencyKey");
    expect(await charges(client, customerId)).toHaveLength(1);
  });

  it("the MCP Inspector's CLI: lists the tools, and a charge sent twice with one key (in _meta) runs once", async () => {
    // @modelcontextprotocol/inspector-cli looks for its package.json relative to the working
    // directory, so it runs from its own build directory
    const build = path.join(ROOT, "node_modules", "@modelcontextprotocol", "inspector-cli", "build");
    const inspector = async (...args: string[]): Promise<unknown> => {
      const { stdout } = await promisify(execFile)(process.execPath, [path.join(build, "index.js"), `${server.url}/mcp`, "--transport", "http", "--header", `Authorization: Bearer ${token}`, ...args], {
        cwd: build,
        timeout: 60_000,
      });
      return JSON.parse(stdout);
    };
    const listed = (await inspector("--method", "tools/list")) as { tools: { name: string; annotations?: Record<string, unknown> }[] };
    expect(listed.tools.find((t) => t.name === "payments.charge")?.annotations).toMatchObject({ destructiveHint: true });
    expect(listed.tools.find((t) => t.name === "payments.list_charges")?.annotations).toMatchObject({ readOnlyHint: true });

    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const key = `fault-mcp-inspector-${randomUUID()}`;
    const charge = () =>
      inspector(
        "--method", "tools/call", "--tool-name", "payments.charge",
        "--tool-arg", `customerId=${customerId}`, "amountCents=4200", "currency=EUR",
        "--tool-metadata", `io.idemgate/idempotency-key=${key}`,
      ) as Promise<CallToolResult>;
    const first = await charge();
    const again = await charge();
    expect(first.isError).toBeFalsy();
    expect(again.content).toEqual(first.content);
    expect(again._meta?.["io.idemgate/result"]).toMatchObject({ replayed: true, key });
    expect(await charges(await httpClient(), customerId)).toHaveLength(1);

    // a keyless write through it is refused, and nothing runs
    const keyless = (await inspector("--method", "tools/call", "--tool-name", "payments.charge", "--tool-arg", `customerId=${customerId}`, "amountCents=1", "currency=EUR")) as CallToolResult;
    expect(keyless.isError).toBe(true);
    expect(await charges(await httpClient(), customerId)).toHaveLength(1);
  });
});
