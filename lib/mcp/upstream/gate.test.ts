import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolRequest, CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { connectClient, startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import type { McpServerConfig } from "./config";
import { mcpToolOrigin } from "./console-view";
import { startMcpUpstreams } from "./serve-upstreams";
import type { McpUpstreams } from "./upstreams";
import { bundledScript } from "@/test/support/bundled-script";

// A guarded server's `gate` setting, and a tool's own, decide what Idemgate gates rather than the
// tools' annotations. Two declarations of test/support/mcp-test-server.ts over stdio: `strict`
// gates every tool (but one), `loose` none.

const ROOT = path.resolve(import.meta.dirname, "../../..");

let gateway: McpGateway;
let upstreams: McpUpstreams;
let client: Client;
let dir: string;
const logs: string[] = [];
/** test/support/mcp-test-server.ts, bundled once */
let mcpTestServer: string;

const server = (name: string, extra: Partial<McpServerConfig>): McpServerConfig => ({
  name,
  command: process.execPath,
  args: [mcpTestServer, "--stdio"],
  cwd: ROOT,
  env: { EFFECTS_FILE: path.join(dir, `${name}.effects`) },
  ...extra,
});

async function effects(server: string, line: string): Promise<number> {
  const text = await readFile(path.join(dir, `${server}.effects`), "utf8").catch(() => "");
  return text.split("\n").filter((l) => l === line).length;
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-mcp-gate-"));
  mcpTestServer = await bundledScript("test/support/mcp-test-server.ts");
  gateway = await startMcpGateway("mcp_gate");
  const configs = [
    server("strict", { gate: "always", tools: { read_count: { gate: "by-annotations" }, no_such_tool: { gate: "never" } } }),
    server("loose", { gate: "never" }),
  ];
  upstreams = (await startMcpUpstreams(gateway.runtime, configs, { log: (line) => logs.push(line) }))!;
  client = await connectClient(gateway.url, await gateway.token("tenant-g"));
});

afterAll(async () => {
  await client?.close().catch(() => {});
  await upstreams?.close();
  await gateway?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const call = (params: Record<string, unknown>) => client.callTool(params as CallToolRequest["params"]) as Promise<CallToolResult>;

it("gate: always gates an idempotentHint tool: a late retry of an old call is a replay and does not undo a newer one", async () => {
  const flag = randomUUID();
  const setFlag = (value: boolean, key?: string) => call({ name: "strict.set_flag", arguments: { name: flag, value }, ...(key ? { idempotencyKey: key } : {}) });
  expect((await setFlag(true)).structuredContent).toMatchObject({ type: "/problems/missing_key" });

  const first = `a-${randomUUID()}`;
  await setFlag(true, first);
  await setFlag(false, `b-${randomUUID()}`);
  // A's retry arrives after B: replayed, so the flag stays as B set it
  const lateRetry = await setFlag(true, first);
  expect(lateRetry._meta?.["io.idemgate/result"]).toMatchObject({ replayed: true });
  expect(await effects("strict", `set_flag:${flag}`)).toBe(2);
});

it("a tool's own gate overrides its server's; a tool the server does not offer is logged, not fatal", async () => {
  const read = await call({ name: "strict.read_count", arguments: { label: randomUUID() } });
  expect(read.isError).toBeFalsy();
  expect(read.structuredContent).toMatchObject({ count: 0 });
  expect(logs).toContain("strict: tools.no_such_tool is declared, but the server offers no tool of that name");
  expect(upstreams.statuses().map((s) => s.state)).toEqual(["up", "up"]);
  // the console says which setting gated a tool
  expect(mcpToolOrigin(gateway.runtime.registry.get("strict.set_flag"))?.gateLabel).toContain("gate: always");
  expect(mcpToolOrigin(gateway.runtime.registry.get("strict.read_count"))?.gateLabel).toContain("readOnlyHint");
});

it("gate: never passes a write through without a key, and still records each call in the audit log", async () => {
  const label = randomUUID();
  const result = await call({ name: "loose.increment", arguments: { label } });
  expect(result.structuredContent).toMatchObject({ label, count: 1 });
  expect(await effects("loose", `increment:${label}`)).toBe(1);
  const executionId = (result._meta?.["io.idemgate/result"] as { executionId: string }).executionId;
  await gateway.runtime.audit.flush();
  const recorded = await gateway.pg.db.prisma.execution.findUnique({ where: { id: executionId } });
  expect(recorded).toMatchObject({ tool: "loose.increment", scope: "tenant-g", key: `passthrough:${executionId}`, outcome: "succeeded" });
});
