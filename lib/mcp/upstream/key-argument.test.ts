import { randomUUID } from "node:crypto";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolRequest, CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { connectClient, startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import { startMcpUpstreams } from "./serve-upstreams";
import type { McpUpstreams } from "./upstreams";
import { bundledScript } from "@/test/support/bundled-script";

// A guarded tool's own `idempotency_key` argument reaches its server untouched, whatever its schema:
// test/support/mcp-test-server.ts lists echo_args with a top-level allOf (a schema Idemgate's
// converter cannot read) that declares the argument, and answers with what it received.

const ROOT = path.resolve(import.meta.dirname, "../../..");

let gateway: McpGateway;
let upstreams: McpUpstreams;
let client: Client;

beforeAll(async () => {
  gateway = await startMcpGateway("mcp_key_argument");
  const server = { name: "counter", command: process.execPath, args: [await bundledScript("test/support/mcp-test-server.ts"), "--stdio"], cwd: ROOT };
  upstreams = (await startMcpUpstreams(gateway.runtime, [server], { log: () => {} }))!;
  client = await connectClient(gateway.url, await gateway.token("tenant-k"));
});

afterAll(async () => {
  await client?.close().catch(() => {});
  await upstreams?.close();
  await gateway?.close();
});

it("forwards a tool's own idempotency_key argument when Idemgate cannot read the tool's schema, and lists the schema as the server did", async () => {
  const listed = (await client.listTools()).tools.find((t) => t.name === "counter.echo_args");
  // Idemgate adds no idempotency_key of its own to a schema it cannot read
  expect(listed?.inputSchema).toEqual({ type: "object", allOf: expect.any(Array) });

  const label = randomUUID();
  const theirs = `their-own-${randomUUID()}`;
  const result = (await client.callTool({
    name: "counter.echo_args",
    arguments: { label, idempotency_key: theirs },
    idempotencyKey: `ours-${randomUUID()}`,
  } as CallToolRequest["params"])) as CallToolResult;
  expect(result.isError).toBeFalsy();
  expect(result.structuredContent).toEqual({ received: { label, idempotency_key: theirs } });
});
