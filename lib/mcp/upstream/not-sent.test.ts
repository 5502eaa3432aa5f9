import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolRequest, CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { connectClient, startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import { freePort, McpTestServerProcess } from "@/test/support/mcp-test-server-process";
import { startMcpUpstreams } from "./serve-upstreams";
import type { McpUpstreams } from "./upstreams";

// A guarded HTTP MCP server's failure before it processed anything is "not run" (DESIGN.md § MCP):
// the key is given back and a retry runs once. Pings are made too rare to notice anything here:
// each failure is met by a call first, as in production between two pings.

let gateway: McpGateway;
let upstreams: McpUpstreams;
let server: McpTestServerProcess;
let client: Client;
let dir: string;
const logs: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-mcp-not-sent-"));
  server = new McpTestServerProcess(await freePort(), path.join(dir, "effects"));
  await server.start();
  gateway = await startMcpGateway("mcp_not_sent");
  upstreams = (await startMcpUpstreams(gateway.runtime, [{ name: "counter", url: server.url, timeoutMs: 5_000 }], {
    pingIntervalMs: 600_000,
    maxBackoffMs: 200,
    log: (line) => logs.push(line),
  }))!;
  client = await connectClient(gateway.url, await gateway.token("tenant-n"));
});

afterAll(async () => {
  await client?.close().catch(() => {});
  await upstreams?.close();
  await server?.stop();
  await gateway?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const increment = (label: string, key: string) =>
  client.callTool({ name: "counter.increment", arguments: { label }, idempotencyKey: key } as CallToolRequest["params"]) as Promise<CallToolResult>;

/** Until the server is up on a connection made at or after `sinceMs`. */
async function upAgain(sinceMs: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const status = upstreams.statuses()[0];
    if (status.state === "up" && status.since.getTime() >= sinceMs) return;
    if (Date.now() > deadline) throw new Error(`counter did not come back\n${logs.join("\n")}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function expectNotRun(result: CallToolResult, why: RegExp): void {
  expect(result.isError).toBe(true);
  // tool_failed is the gateway's "not run, the key was released" (outcome_unknown would hold it)
  expect(result.structuredContent).toMatchObject({ type: "/problems/tool_failed", detail: expect.stringMatching(why) });
}

it("a server stopped before any ping noticed: the call is not run; once it is back the retry runs once", async () => {
  await upAgain(0);
  const label = randomUUID();
  const key = `refused-${randomUUID()}`;
  await server.stop();
  const stoppedAtMs = Date.now();
  expectNotRun(await increment(label, key), /could not be made \(ECONNREFUSED\)/);
  expect(await gateway.runtime.store.get("tenant-n", key)).toBeNull();

  await server.start();
  await upAgain(stoppedAtMs);
  expect((await increment(label, key)).structuredContent).toMatchObject({ label, count: 1 });
  expect((await increment(label, key))._meta?.["io.idemgate/result"]).toMatchObject({ replayed: true });
  expect(await server.effects(`increment:${label}`)).toBe(1);
});

it("a server restarted between two calls (its sessions gone): the call is not run, a new session is opened, the retry runs once", async () => {
  await upAgain(0);
  await server.stop();
  await server.start();
  const label = randomUUID();
  const key = `restarted-${randomUUID()}`;
  const calledAtMs = Date.now();
  expectNotRun(await increment(label, key), /no longer knows the session/);
  expect(await gateway.runtime.store.get("tenant-n", key)).toBeNull();

  await upAgain(calledAtMs);
  expect((await increment(label, key)).structuredContent).toMatchObject({ label, count: 1 });
  expect((await increment(label, key))._meta?.["io.idemgate/result"]).toMatchObject({ replayed: true });
  expect(await server.effects(`increment:${label}`)).toBe(1);
});
