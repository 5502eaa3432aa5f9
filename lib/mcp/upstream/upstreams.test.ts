import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolRequest, CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as invokeRoute } from "@/app/api/v1/tools/[tool]/invoke/route";
import { GET as listToolsRoute } from "@/app/api/v1/tools/route";
import { getKeyDetail } from "@/lib/operator/get-key-detail";
import { presentKeyDetail, presentKeyDetailForTenant } from "@/lib/operator/present-key-detail";
import { connectClient, startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import { freePort, McpTestServerProcess } from "@/test/support/mcp-test-server-process";
import { KEY_ARGUMENT } from "../tools";
import type { McpServerConfig } from "./config";
import { startMcpUpstreams } from "./serve-upstreams";
import { UpstreamConnection, type McpUpstreams } from "./upstreams";
import { bundledScript } from "@/test/support/bundled-script";

// Idemgate in front of other MCP servers (IDEMGATE_MCP_SERVERS): two servers built with the SDK
// (test/support/mcp-test-server.ts), one over Streamable HTTP and one over stdio, each a real
// process that appends every side effect to a file. Clients reach their tools through Idemgate's
// /mcp with the SDK's own client.

const ROOT = path.resolve(import.meta.dirname, "../../..");

let gateway: McpGateway;
let upstreams: McpUpstreams;
let token: string;
let dir: string;
let httpServer: McpTestServerProcess;
const logs: string[] = [];
const clients: Client[] = [];

const effectsFile = (server: string) => path.join(dir, `${server}.effects`);
async function effects(server: string, line: string): Promise<number> {
  const text = await readFile(effectsFile(server), "utf8").catch(() => "");
  return text.split("\n").filter((l) => l === line).length;
}

async function waitFor<T>(what: string, probe: () => T | null | false | Promise<T | null | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${logs.join("\n")}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function connect(): Promise<Client> {
  const client = await connectClient(gateway.url, token);
  clients.push(client);
  return client;
}

const call = (client: Client, params: Record<string, unknown>) => client.callTool(params as CallToolRequest["params"]) as Promise<CallToolResult>;
const status = (name: string) => upstreams.statuses().find((s) => s.name === name)!;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-mcp-upstreams-"));
  httpServer = new McpTestServerProcess(await freePort(), effectsFile("counter_http"));
  await httpServer.start();
  gateway = await startMcpGateway("mcp_upstreams");
  token = await gateway.token("tenant-u");
  const configs: McpServerConfig[] = [
    { name: "counter_http", url: httpServer.url, timeoutMs: 1_500 },
    {
      name: "counter_stdio",
      command: process.execPath,
      args: [await bundledScript("test/support/mcp-test-server.ts"), "--stdio"],
      cwd: ROOT,
      env: { EFFECTS_FILE: effectsFile("counter_stdio") },
      timeoutMs: 1_500,
    },
  ];
  upstreams = (await startMcpUpstreams(gateway.runtime, configs, { pingIntervalMs: 300, maxBackoffMs: 500, log: (line) => logs.push(line) }))!;
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await upstreams?.close();
  await httpServer?.stop();
  await gateway?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("Idemgate in front of other MCP servers", () => {
  it("connects to both and lists their tools as <server>.<tool>, with their own schemas and annotations", async () => {
    await waitFor("both servers to be up", () => upstreams.statuses().every((s) => s.state === "up"));
    expect(upstreams.statuses().map((s) => [s.name, s.transport, s.state, s.tools])).toEqual([
      ["counter_http", "http", "up", 11],
      ["counter_stdio", "stdio", "up", 11],
    ]);
    const { tools } = await (await connect()).listTools();
    for (const server of ["counter_http", "counter_stdio"]) {
      const byName = (tool: string) => tools.find((t) => t.name === `${server}.${tool}`);
      expect(byName("increment")).toMatchObject({ _meta: { "io.idemgate/kind": "write", "io.idemgate/origin": { server, tool: "increment" } } });
      expect(byName("increment")?.inputSchema.properties).toHaveProperty("label");
      expect(byName("increment")?.inputSchema.properties).toHaveProperty(KEY_ARGUMENT);
      expect(byName("read_count")?.annotations).toMatchObject({ readOnlyHint: true });
      expect(byName("set_flag")?.annotations).toMatchObject({ idempotentHint: true });
      expect(byName("set_flag")?.inputSchema.properties ?? {}).not.toHaveProperty(KEY_ARGUMENT);
    }
    // and the demo tools are still there
    expect(tools.map((t) => t.name)).toContain("payments.charge");
  });

  it("lists a guarded server's tools in GET /api/v1/tools as run at that server, not in Idemgate's process", async () => {
    await waitFor("both servers to be up", () => upstreams.statuses().every((s) => s.state === "up"));
    const response = await listToolsRoute(new Request("http://gateway.invalid/api/v1/tools", { headers: { Authorization: `Bearer ${token}` } }), { params: Promise.resolve({}) });
    expect(response.status).toBe(200);
    const { tools } = (await response.json()) as { tools: { name: string; source: string }[] };
    const sourceOf = (name: string) => tools.find((t) => t.name === name)?.source;
    expect(sourceOf("counter_http.increment")).toBe("mcp");
    expect(sourceOf("counter_stdio.read_count")).toBe("mcp");
    expect(sourceOf("payments.charge")).toBe("in_process");
  });

  for (const server of ["counter_http", "counter_stdio"]) {
    describe(server, () => {
      it("runs a write retried five times with one key once; every retry gets the first result", async () => {
        const client = await connect();
        const label = randomUUID();
        const key = `proxied-${randomUUID()}`;
        const results = await Promise.all(Array.from({ length: 5 }, () => call(client, { name: `${server}.increment`, arguments: { label }, idempotencyKey: key })));
        for (const result of results) {
          expect(result.isError).toBeFalsy();
          expect(result.content).toEqual(results[0].content);
        }
        expect(results[0].structuredContent).toMatchObject({ label, count: 1 });
        expect(await effects(server, `increment:${label}`)).toBe(1);
        const read = await call(client, { name: `${server}.read_count`, arguments: { label } });
        expect(read.structuredContent).toMatchObject({ count: 1 });
      });

      it("refuses a keyless write (nothing is sent); passes reads and idempotent tools through without a key", async () => {
        const client = await connect();
        const label = randomUUID();
        const keyless = await call(client, { name: `${server}.increment`, arguments: { label } });
        expect(keyless.isError).toBe(true);
        expect(keyless.structuredContent).toMatchObject({ type: "/problems/missing_key" });
        expect(await effects(server, `increment:${label}`)).toBe(0);

        const flag = randomUUID();
        const executionIds: string[] = [];
        for (let i = 0; i < 2; i++) {
          const set = await call(client, { name: `${server}.set_flag`, arguments: { name: flag, value: true } });
          expect(set.isError).toBeFalsy();
          executionIds.push((set._meta?.["io.idemgate/result"] as { executionId: string }).executionId);
        }
        expect(await effects(server, `set_flag:${flag}`)).toBe(2);
        await call(client, { name: `${server}.read_count`, arguments: { label } });

        // the idempotent tool's calls are in the audit log, each under a key of its own, with transport mcp; reads are not
        await gateway.runtime.audit.flush();
        const recorded = await gateway.pg.db.prisma.execution.findMany({ where: { id: { in: executionIds } } });
        expect(recorded).toHaveLength(2);
        for (const row of recorded) {
          expect(row).toMatchObject({ tool: `${server}.set_flag`, scope: "tenant-u", key: `passthrough:${row.id}`, transport: "mcp", outcome: "succeeded", resultStatus: 200 });
          expect(row.caller).not.toBeNull();
        }
        expect(await gateway.pg.db.prisma.execution.count({ where: { tool: `${server}.read_count` } })).toBe(0);
        // and the key store holds nothing for them
        expect((await gateway.runtime.store.list({ scope: "tenant-u", tool: `${server}.set_flag`, limit: 10, nowMs: Date.now() })).items).toEqual([]);
      });

      it("stores a tool error (isError) as a final result and replays it", async () => {
        const client = await connect();
        const label = randomUUID();
        const key = `refuse-${randomUUID()}`;
        const first = await call(client, { name: `${server}.refuse`, arguments: { label }, idempotencyKey: key });
        expect(first).toMatchObject({ isError: true, content: [{ type: "text", text: `refused ${label}` }] });
        const again = await call(client, { name: `${server}.refuse`, arguments: { label }, idempotencyKey: key });
        expect(again).toMatchObject({ isError: true, content: first.content, _meta: { "io.idemgate/result": { replayed: true } } });
        expect(await effects(server, `refuse:${label}`)).toBe(1);
      });

      it("makes a call that hangs past its timeout an unknown outcome that is never run again", async () => {
        const client = await connect();
        const label = randomUUID();
        const key = `hang-${randomUUID()}`;
        const first = await call(client, { name: `${server}.hang`, arguments: { label, ms: 4_000 }, idempotencyKey: key });
        expect(first.isError).toBe(true);
        expect(first.structuredContent).toMatchObject({ type: "/problems/outcome_unknown", state: "unknown", status: 504 });
        expect(await effects(server, `hang:${label}`)).toBe(1);
        const retry = await call(client, { name: `${server}.hang`, arguments: { label, ms: 4_000 }, idempotencyKey: key });
        expect(retry.structuredContent).toMatchObject({ type: "/problems/outcome_unknown" });
        expect(await effects(server, `hang:${label}`)).toBe(1);
        const record = await gateway.runtime.store.get("tenant-u", key);
        expect(record).toMatchObject({ status: "unknown", outcomeNote: expect.stringContaining("within 1500 ms") });
      });
    });
  }

  it("keeps a guarded server's error text for operators; callers, retries and the tenant's key view read a generic note", async () => {
    const client = await connect();
    const label = randomUUID();
    const key = `fail-${randomUUID()}`;
    const internals = "db.internal:5432";
    const first = await call(client, { name: "counter_http.fail_http", arguments: { label }, idempotencyKey: key });
    expect(first.isError).toBe(true);
    expect(first.structuredContent).toMatchObject({ type: "/problems/outcome_unknown", detail: expect.stringContaining("the call to the MCP server counter_http failed") });
    const retry = await call(client, { name: "counter_http.fail_http", arguments: { label }, idempotencyKey: key });
    expect(retry.structuredContent).toMatchObject({ type: "/problems/outcome_unknown", detail: expect.stringContaining("the call to the MCP server counter_http failed") });
    for (const answer of [first, retry]) expect(JSON.stringify(answer)).not.toContain(internals);
    expect(await effects("counter_http", `fail_http:${label}`)).toBe(1);

    // operators read the server's answer (key page, audit log); the tenant's view of its key (GET /api/v1/keys/… with its token) does not
    await gateway.runtime.audit.flush();
    const detail = await getKeyDetail(gateway.runtime, "tenant-u", key);
    expect(JSON.stringify(presentKeyDetail(detail))).toContain(internals);
    const tenant = JSON.stringify(presentKeyDetailForTenant(detail));
    expect(tenant).toContain("the call to the MCP server counter_http failed");
    expect(tenant).not.toContain(internals);
  });

  it("serves the same tools through the HTTP gateway: one run per key, the result whole, 422 for a tool error", async () => {
    const label = randomUUID();
    const key = `gateway-${randomUUID()}`;
    const invoke = (tool: string, args: unknown, withKey: string) =>
      invokeRoute(
        new Request(`http://gateway.invalid/api/v1/tools/${tool}/invoke`, {
          method: "POST",
          headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", "Idempotency-Key": withKey },
          body: JSON.stringify(args),
        }),
        { params: Promise.resolve({ tool }) },
      );
    const first = await invoke("counter_http.increment", { label }, key);
    const again = await invoke("counter_http.increment", { label }, key);
    expect(first.status).toBe(200);
    const body = await first.json();
    expect(body).toMatchObject({ content: [{ type: "text" }], structuredContent: { label, count: 1 } });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.json()).toEqual(body);
    expect(await effects("counter_http", `increment:${label}`)).toBe(1);
    const refused = await invoke("counter_http.refuse", { label }, `gateway-refuse-${randomUUID()}`);
    expect(refused.status).toBe(422);
    expect(await refused.json()).toMatchObject({ isError: true });
    // an idempotentHint tool over HTTP is passed through and recorded too, with transport http
    const flag = await invoke("counter_http.set_flag", { name: label, value: true }, `gateway-flag-${randomUUID()}`);
    expect(flag.status).toBe(200);
    await gateway.runtime.audit.flush();
    const recorded = await gateway.pg.db.prisma.execution.findMany({ where: { tool: "counter_http.set_flag", transport: "http" } });
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ scope: "tenant-u", key: `passthrough:${recorded[0].id}`, outcome: "succeeded" });
  });

  it("re-lists a server's tools when it says they changed", async () => {
    const client = await connect();
    const added = await call(client, { name: "counter_stdio.add_tool", arguments: {}, idempotencyKey: `add-${randomUUID()}` });
    expect(added.isError).toBeFalsy();
    await waitFor("counter_stdio.extra to be listed", async () => (await client.listTools()).tools.some((t) => t.name === "counter_stdio.extra"));
    const extra = await call(client, { name: "counter_stdio.extra", arguments: {} });
    expect(extra.structuredContent).toEqual({ extra: true });
  });

  it("a server killed and restarted: calls meanwhile are not run (nothing sent); its tools work again without restarting Idemgate", async () => {
    const client = await connect();
    await httpServer.stop();
    await waitFor("counter_http to be down", () => status("counter_http").state === "down");
    const label = randomUUID();
    const key = `down-${randomUUID()}`;
    const refused = await call(client, { name: "counter_http.increment", arguments: { label }, idempotencyKey: key });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ type: "/problems/tool_failed", detail: expect.stringContaining("not connected") });
    // its tools stay listed while it is down
    expect((await client.listTools()).tools.some((t) => t.name === "counter_http.increment")).toBe(true);

    await httpServer.start();
    await waitFor("counter_http to be up again", () => status("counter_http").state === "up");
    // the key was given back (nothing had run): the retry runs once
    const retried = await call(client, { name: "counter_http.increment", arguments: { label }, idempotencyKey: key });
    expect(retried.isError).toBeFalsy();
    expect(await effects("counter_http", `increment:${label}`)).toBe(1);
  });

  it("a server that cannot be reached is down with the reason, for the status page", async () => {
    const offline = new UpstreamConnection({ name: "offline", url: "http://127.0.0.1:1/mcp" }, { onTools: () => {}, maxBackoffMs: 60_000 });
    try {
      await offline.start();
      expect(offline.status()).toMatchObject({ name: "offline", transport: "http", state: "down", error: expect.stringMatching(/^cannot connect: /), tools: 0 });
      expect(offline.connected()).toBe(false);
    } finally {
      await offline.close();
    }
  });

  it("a stdio server whose process exits is started again, and its tools work", async () => {
    const client = await connect();
    const before = status("counter_stdio").since;
    const bye = await call(client, { name: "counter_stdio.shutdown", arguments: {}, idempotencyKey: `bye-${randomUUID()}` });
    expect(bye.structuredContent).toEqual({ exiting: true });
    await waitFor("counter_stdio to go down and come back", () => status("counter_stdio").state === "up" && status("counter_stdio").since > before);
    expect(logs.some((line) => line.startsWith("counter_stdio: down"))).toBe(true);
    const label = randomUUID();
    const result = await call(client, { name: "counter_stdio.increment", arguments: { label }, idempotencyKey: `after-${randomUUID()}` });
    expect(result.structuredContent).toMatchObject({ label, count: 1 });
    expect(await effects("counter_stdio", `increment:${label}`)).toBe(1);
  });
});
