import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolRequest, CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectClient, startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import { freePort, McpTestServerProcess, type McpTestServerSdk } from "@/test/support/mcp-test-server-process";
import { startMcpUpstreams } from "./serve-upstreams";
import type { McpUpstreams } from "./upstreams";

// A guarded HTTP MCP server's failure before it processed anything is "not run" (DESIGN.md § MCP):
// the key is given back and a retry runs once; a failure after it may have processed the call is
// unknown, and the key is held. Both revisions the guard speaks: `legacy` is a 1.x-SDK server
// (2025-11-25, stateful sessions), `modern` a v2-SDK server (2026-07-28: stateless, no session).
// Pings are made too rare to notice anything here: each failure is met by a call first, as in
// production between two pings.

const SERVERS: { name: string; sdk: McpTestServerSdk; revision: string }[] = [
  { name: "legacy", sdk: "v1", revision: "2025-11-25" },
  { name: "modern", sdk: "v2", revision: "2026-07-28" },
];

let gateway: McpGateway;
let upstreams: McpUpstreams;
const servers = new Map<string, McpTestServerProcess>();
let client: Client;
let dir: string;
const logs: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-mcp-not-sent-"));
  for (const { name, sdk } of SERVERS) {
    const server = new McpTestServerProcess(await freePort(), path.join(dir, `effects-${name}`), sdk);
    await server.start();
    servers.set(name, server);
  }
  gateway = await startMcpGateway("mcp_not_sent");
  upstreams = (await startMcpUpstreams(
    gateway.runtime,
    SERVERS.map(({ name }) => ({ name, url: servers.get(name)!.url, timeoutMs: 5_000 })),
    { pingIntervalMs: 600_000, maxBackoffMs: 200, log: (line) => logs.push(line) },
  ))!;
  client = await connectClient(gateway.url, await gateway.token("tenant-n"));
});

afterAll(async () => {
  await client?.close().catch(() => {});
  await upstreams?.close();
  for (const server of servers.values()) await server.stop();
  await gateway?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const call = (name: string, label: string, key: string) =>
  client.callTool({ name, arguments: { label }, idempotencyKey: key } as CallToolRequest["params"]) as Promise<CallToolResult>;

/** Until `name` is up on a connection made at or after `sinceMs`. */
async function upAgain(name: string, sinceMs: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const status = upstreams.statuses().find((s) => s.name === name)!;
    if (status.state === "up" && status.since.getTime() >= sinceMs) return;
    if (Date.now() > deadline) throw new Error(`${name} did not come back\n${logs.join("\n")}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function expectNotRun(result: CallToolResult, why: RegExp): void {
  expect(result.isError).toBe(true);
  // tool_failed is the gateway's "not run, the key was released" (outcome_unknown would hold it)
  expect(result.structuredContent).toMatchObject({ type: "/problems/tool_failed", detail: expect.stringMatching(why) });
}

async function expectRunsOnceThenReplays(server: string, label: string, key: string): Promise<void> {
  expect((await call(`${server}.increment`, label, key)).structuredContent).toMatchObject({ label, count: 1 });
  expect((await call(`${server}.increment`, label, key))._meta?.["io.idemgate/result"]).toMatchObject({ replayed: true });
  expect(await servers.get(server)!.effects(`increment:${label}`)).toBe(1);
}

describe.each(SERVERS)("a guarded server on $revision ($name)", ({ name, revision }) => {
  const server = () => servers.get(name)!;

  it(`is reached on ${revision}, negotiated as the SDK negotiates`, async () => {
    await upAgain(name, 0);
    expect(upstreams.statuses().find((s) => s.name === name)).toMatchObject({ state: "up", protocolVersion: revision });
  });

  it("a server stopped before any ping noticed: the call is not run; once it is back the retry runs once", async () => {
    await upAgain(name, 0);
    const label = randomUUID();
    const key = `refused-${randomUUID()}`;
    await server().stop();
    const stoppedAtMs = Date.now();
    expectNotRun(await call(`${name}.increment`, label, key), /could not be made \(ECONNREFUSED\)/);
    expect(await gateway.runtime.store.get("tenant-n", key)).toBeNull();

    await server().start();
    await upAgain(name, stoppedAtMs);
    await expectRunsOnceThenReplays(name, label, key);
  });

  if (revision === "2025-11-25") {
    it("a server restarted between two calls (its sessions gone): the call is not run, a new session is opened, the retry runs once", async () => {
      await upAgain(name, 0);
      await server().stop();
      await server().start();
      const label = randomUUID();
      const key = `restarted-${randomUUID()}`;
      const calledAtMs = Date.now();
      expectNotRun(await call(`${name}.increment`, label, key), /no longer knows the session/);
      expect(await gateway.runtime.store.get("tenant-n", key)).toBeNull();

      await upAgain(name, calledAtMs);
      await expectRunsOnceThenReplays(name, label, key);
    });
  } else {
    it("a server restarted between two calls: stateless, there is no session to lose, and the call runs once", async () => {
      await upAgain(name, 0);
      await server().stop();
      await server().start();
      await expectRunsOnceThenReplays(name, randomUUID(), `restarted-${randomUUID()}`);
    });
  }

  it("an HTTP 400 to the POST (the server refused the request before processing it): the call is not run and the key is given back", async () => {
    await upAgain(name, 0);
    const label = randomUUID();
    const key = `bad-request-${randomUUID()}`;
    expectNotRun(await call(`${name}.bad_request`, label, key), /refused the request with HTTP 400/);
    expect(await gateway.runtime.store.get("tenant-n", key)).toBeNull();
  });

  for (const tool of ["fail_http", "reset_http"]) {
    const what = tool === "fail_http" ? "an HTTP 500 after the server ran the call" : "a connection reset after the call was sent";
    it(`${what} stays unknown: the key is held and the retry does not run it again`, async () => {
      await upAgain(name, 0);
      const label = randomUUID();
      const key = `${tool}-${randomUUID()}`;
      for (let attempt = 0; attempt < 2; attempt++) {
        const answer = await call(`${name}.${tool}`, label, key);
        expect(answer.isError).toBe(true);
        expect(answer.structuredContent).toMatchObject({ type: "/problems/outcome_unknown" });
      }
      expect(await gateway.runtime.store.get("tenant-n", key)).toMatchObject({ status: "unknown" });
      expect(await server().effects(`${tool}:${label}`)).toBe(1);
    });
  }
});
