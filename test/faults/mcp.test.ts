import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { promisify } from "node:util";
import type { CallToolResult, Client } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testPort } from "@/scripts/test-ports.mjs";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { connectOnRevision, connectStdioOnRevision, REVISIONS, type McpRevision } from "@/test/support/mcp-revisions";
import { ROOT, removeDataDir, startServer, type RunningServer } from "@/test/support/server";
import { deleteRedisPrefix } from "@/test/support/stores";

// /mcp in the production server (scripts/serve.mjs, as `npm start` runs it), one server per
// configuration — embedded (nothing configured: PGlite for keys and audit, as a first `npm start`)
// and Redis + PostgreSQL — and on each, every case on both protocol revisions with the official v2
// client (2026-07-28 negotiated through server/discover, 2025-11-25 through initialize; each case
// asserts the revision it got): over Streamable HTTP and through the stdio bridge, and a server
// process killed in the middle of a call from each revision. The MCP Inspector's CLI, a 2025-11-25
// client nobody here wrote (built on the 1.x SDK), runs on the embedded configuration. Side effects are
// counted in the demo tools' own table on Redis + PostgreSQL, and through payments.list_charges on
// the embedded database (it belongs to the server process).
// lib/mcp/revisions.test.ts runs both revisions in-process. Ports 3141 and 3162 are this file's (moved by IDEMGATE_TEST_PORT_BASE).

const text = (result: CallToolResult) => (result.content[0] as { text: string }).text;
const call = (client: Client, params: Record<string, unknown>) => client.callTool(params as never) as Promise<CallToolResult>;
const chargeArgs = (customerId: string, extra: Record<string, unknown> = {}) => ({ customerId, amountCents: 4200, currency: "EUR", ...extra });

const configurations = [
  { name: "embedded (PGlite)", port: testPort(3162), servers: false },
  { name: "Redis and PostgreSQL", port: testPort(3141), servers: true },
] as const;

describe.each(configurations)("MCP against a production server on the $name configuration", (configuration) => {
  const dataDir = `.data/fault-mcp-${configuration.servers ? "servers" : "embedded"}`;
  const prefix = `idgfault-mcp-${randomUUID().slice(0, 6)}`;
  let pg: Awaited<ReturnType<typeof createTestPostgres>> | null = null;
  let server: RunningServer;
  let env: Record<string, string>;
  let token: string;
  const clients: Client[] = [];
  let reader: Client | null = null;

  async function httpClient(revision: McpRevision): Promise<Client> {
    const client = await connectOnRevision(`${server.url}/mcp`, token, revision, "fault-suite");
    clients.push(client);
    expect(client.getNegotiatedProtocolVersion()).toBe(revision);
    return client;
  }
  /** charges made for the customer, read where the configuration keeps them */
  async function charges(customerId: string): Promise<number> {
    if (pg) return pg.db.prisma.demoCharge.count({ where: { customerId } });
    reader ??= await httpClient("2025-11-25");
    const listed = await call(reader, { name: "payments.list_charges", arguments: { customerId } });
    expect(listed.isError, text(listed)).toBeFalsy();
    return (listed.structuredContent as { charges: unknown[] }).charges.length;
  }

  beforeAll(async () => {
    await removeDataDir(dataDir);
    env = { IDEMGATE_RECONCILE_INTERVAL_MS: "0", IDEMGATE_DEMO_LEASE_MS: "4000" };
    if (configuration.servers) {
      pg = await createTestPostgres("fault_mcp");
      Object.assign(env, { DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix });
    }
    // without DATABASE_URL and REDIS_URL (startServer blanks both): the embedded default
    server = await startServer({ port: configuration.port, dataDir, env });
    token = (await server.credentials()).apiToken;
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await server?.stop();
    if (pg) await deleteRedisPrefix(prefix);
    await pg?.drop();
    await removeDataDir(dataDir);
  });

  describe.each(REVISIONS)("the v2 client on $revision", ({ revision }) => {
    it("over Streamable HTTP: lists with annotations, runs five calls with one key once with identical content, refuses a keyless write", async () => {
      const client = await httpClient(revision);
      expect(client.getProtocolEra()).toBe(revision === "2026-07-28" ? "modern" : "legacy");
      expect(client.getServerVersion()?.name).toBe("idemgate");
      const { tools } = await client.listTools();
      expect(tools.find((t) => t.name === "payments.list_charges")?.annotations).toMatchObject({ readOnlyHint: true });
      expect(tools.find((t) => t.name === "payments.charge")?.inputSchema.properties).toHaveProperty("idempotency_key");

      const customerId = `cus_${randomUUID().slice(0, 8)}`;
      const key = `fault-mcp-${randomUUID()}`;
      const args = chargeArgs(customerId, { simulate: { latencyMs: 300 } });
      const results = await Promise.all(Array.from({ length: 5 }, () => call(client, { name: "payments.charge", arguments: args, idempotencyKey: key })));
      for (const result of results) {
        expect(result.isError, text(result)).toBeFalsy();
        expect(result.content).toEqual(results[0].content);
      }
      expect(results.map((r) => (r._meta?.["io.idemgate/result"] as { replayed?: boolean }).replayed).sort()).toEqual([false, true, true, true, true]);
      expect(await charges(customerId)).toBe(1);

      const keyless = await call(client, { name: "payments.charge", arguments: chargeArgs(customerId, { amountCents: 1 }) });
      expect(keyless.isError).toBe(true);
      expect(text(keyless)).toContain("params.idempotencyKey");
      expect(await charges(customerId)).toBe(1);
    });

    it("through the stdio bridge: the same key replays what the HTTP client got", async () => {
      const http = await httpClient(revision);
      const bridge = { command: process.execPath, args: [path.join(ROOT, "bin", "idemgate.mjs"), "mcp", "--url", server.url, "--token", token], cwd: ROOT, stderr: "ignore" as const };
      const stdio = await connectStdioOnRevision(bridge, revision, "fault-suite-stdio");
      clients.push(stdio);
      expect(stdio.getNegotiatedProtocolVersion()).toBe(revision);
      const customerId = `cus_${randomUUID().slice(0, 8)}`;
      const key = `fault-mcp-stdio-${randomUUID()}`;
      const first = await call(http, { name: "payments.charge", arguments: chargeArgs(customerId), idempotencyKey: key });
      const again = await call(stdio, { name: "payments.charge", arguments: chargeArgs(customerId), idempotencyKey: key });
      expect(first.isError, text(first)).toBeFalsy();
      expect(again.content).toEqual(first.content);
      expect(again._meta?.["io.idemgate/result"]).toMatchObject({ replayed: true, key });
      expect(await charges(customerId)).toBe(1);
    });
  });

  it("a server killed while a call from each revision runs: each client's retry with its key after the restart does not charge twice", async () => {
    // one kill for both revisions: a call from each is in flight when the process dies
    const inFlight = await Promise.all(
      REVISIONS.map(async ({ revision }) => {
        const customerId = `cus_${randomUUID().slice(0, 8)}`;
        const args = chargeArgs(customerId, { simulate: { afterEffectMs: 3_000 } });
        const key = `fault-mcp-kill-${revision}-${randomUUID()}`;
        const lost = call(await httpClient(revision), { name: "payments.charge", arguments: args, idempotencyKey: key }).catch((err: Error) => err);
        return { revision, customerId, args, key, lost };
      }),
    );
    const deadline = Date.now() + 20_000;
    for (const { customerId } of inFlight) {
      while ((await charges(customerId)) === 0) {
        if (Date.now() > deadline) throw new Error(`the charge for ${customerId} was not committed:\n${server.output().slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    await server.kill();
    for (const { lost } of inFlight) expect(await lost).toBeInstanceOf(Error);

    server = await startServer({ port: configuration.port, dataDir, env });
    reader = null;
    for (const { revision, customerId, args, key } of inFlight) {
      const retry = await call(await httpClient(revision), { name: "payments.charge", arguments: args, idempotencyKey: key });
      // the key is held (in progress until its lease ends, then stuck): never run again by itself
      expect(retry.isError).toBe(true);
      expect(retry.structuredContent).toMatchObject({ key, type: expect.stringMatching(/^\/problems\/(conflict|stuck)$/) });
      expect(await charges(customerId)).toBe(1);
    }
  });

  // a third-party 2025-11-25 client, not a revision case: once, on the embedded configuration (a first `npm start`)
  if (!configuration.servers) it("the MCP Inspector's CLI (a 2025-11-25 client): lists the tools, and a charge sent twice with one key (in _meta) runs once", async () => {
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
    expect(await charges(customerId)).toBe(1);

    // a keyless write through it is refused, and nothing runs
    const keyless = (await inspector("--method", "tools/call", "--tool-name", "payments.charge", "--tool-arg", `customerId=${customerId}`, "amountCents=1", "currency=EUR")) as CallToolResult;
    expect(keyless.isError).toBe(true);
    expect(await charges(customerId)).toBe(1);
  });
});
