import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "@/lib/tools/define-tool";
import { mcpServerRows, mcpToolOrigin } from "./console-view";
import { McpUpstreams } from "./upstreams";
import type { ProxiedToolDefinition } from "./proxied-tool";
import { bundledScript } from "@/test/support/bundled-script";

// What the console shows of guarded MCP servers: each proxied tool's origin and gate, and one
// status row per server. A real test MCP server (test/support/mcp-test-server.ts) over stdio, and a
// server whose command does not exist, so it stays down.

const ROOT = path.resolve(import.meta.dirname, "../../..");

let upstreams: McpUpstreams;
let tools: ProxiedToolDefinition[] = [];

beforeAll(async () => {
  upstreams = new McpUpstreams(
    [
      { name: "counter", command: process.execPath, args: [await bundledScript("test/support/mcp-test-server.ts"), "--stdio"], cwd: ROOT, timeoutMs: 1_500 },
      { name: "gone", command: path.join(ROOT, "no-such-mcp-server"), timeoutMs: 1_500 },
    ],
    { pingIntervalMs: 300, maxBackoffMs: 500, log: () => {}, onChange: (listed) => (tools = listed) },
  );
  await upstreams.start();
}, 30_000);

afterAll(async () => {
  await upstreams?.close();
});

describe("mcpToolOrigin", () => {
  it("names the server and the gate each proxied tool gets from its annotations", () => {
    const byName = new Map(tools.map((t) => [t.name, mcpToolOrigin(t)]));
    expect(byName.get("counter.increment")).toMatchObject({ server: "counter", tool: "increment", gate: "write" });
    expect(byName.get("counter.read_count")).toMatchObject({ server: "counter", tool: "read_count", gate: "read" });
    expect(byName.get("counter.set_flag")).toMatchObject({ server: "counter", tool: "set_flag", gate: "idempotent" });
    expect(byName.get("counter.set_flag")!.gateLabel).toMatch(/passed through/);
  });

  it("is null for a configured tool", () => {
    const configured = defineTool({ name: "send_email", kind: "write", description: "Sends an email", schema: z.object({}), run: async () => ({ status: 200, body: {} }) });
    expect(mcpToolOrigin(configured)).toBeNull();
  });
});

describe("mcpServerRows", () => {
  it("has one row per configured server, a warning for the one that is down, with its error", () => {
    const rows = mcpServerRows(upstreams.statuses());
    expect(rows.map((r) => r.name)).toEqual(["counter", "gone"]);
    expect(rows[0]).toMatchObject({ state: "up", warning: false, error: null });
    expect(rows[0].tools).toBeGreaterThanOrEqual(3);
    expect(rows[1].state).not.toBe("up");
    expect(rows[1].warning).toBe(true);
    expect(rows[1].error).toBeTruthy();
  });

  it("is empty when no MCP server is configured in this process", () => {
    expect(mcpServerRows()).toEqual([]);
  });
});
