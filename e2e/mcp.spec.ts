import { randomUUID } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { expect, test, type Page, type TestInfo } from "./fixtures";
import { signInAsOperator } from "./auth";
import { OFFLINE_MCP_URL } from "./mcp-servers";
import { SCREENSHOTS } from "./screenshots";

// The console and the guarded MCP servers of e2e/mcp-servers.ts: `counter` (stdio, started by
// Idemgate) and `offline` (nobody listens).

async function shot(page: Page, testInfo: TestInfo, name: string) {
  if (!SCREENSHOTS) return;
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: `e2e/screenshots/${name}-${testInfo.project.name}.png`, fullPage: true, animations: "disabled" });
}

test("the Tools pages show guarded MCP servers' tools with their origin and gate, and each pass-through call with its transport", async ({ page, baseURL }, testInfo) => {
  const { apiToken } = await signInAsOperator(page, testInfo);
  // the stdio server is started by the server itself: its tools appear once it is connected
  await expect(async () => {
    await page.goto("/tools");
    await expect(page.getByTestId("tool-row-counter.increment")).toBeVisible({ timeout: 1_000 });
  }).toPass({ timeout: 30_000 });

  const origin = (tool: string) => page.getByTestId(`tool-row-${tool}`).getByTestId("mcp-origin");
  for (const [tool, gate] of [
    ["counter.increment", "write"],
    ["counter.read_count", "read"],
    ["counter.set_flag", "idempotent"],
  ] as const) {
    await expect(origin(tool)).toHaveAttribute("data-mcp-server", "counter");
    await expect(origin(tool)).toHaveAttribute("data-mcp-gate", gate);
  }
  await expect(origin("counter.increment")).toHaveText(/via MCP server\s*counter\s*·\s*gated write/);
  await expect(origin("counter.set_flag")).toContainText("passed through");
  // configured tools carry no tag
  await expect(origin("payments.charge")).toHaveCount(0);
  await shot(page, testInfo, "mcp-tools");

  // one call to the idempotent tool over /mcp, as an agent would make it
  const session = `e2e-mcp-${randomUUID().slice(0, 8)}`;
  const client = new Client({ name: "e2e", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL("/mcp", baseURL), { requestInit: { headers: { Authorization: `Bearer ${apiToken}`, "Idemgate-Session": session } } }),
  );
  try {
    const result = (await client.callTool({ name: "counter.set_flag", arguments: { name: session, value: true } })) as CallToolResult;
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toEqual({ name: session, value: true });
  } finally {
    await client.close();
  }

  await page.goto("/tools/counter.set_flag");
  await expect(page.getByTestId("mcp-origin-detail")).toContainText("set_flag at the MCP server counter");
  // the outcome is written a moment after the answer: the page shows it on a reload
  const call = page.getByTestId("pass-through-call").filter({ hasText: session });
  await expect(async () => {
    await page.reload();
    await expect(call).toHaveAttribute("data-outcome", "succeeded", { timeout: 1_000 });
  }).toPass({ timeout: 15_000 });
  await expect(call).toHaveAttribute("data-transport", "mcp");
  await expect(call).toContainText("mcp");
  await shot(page, testInfo, "mcp-pass-through");
});

test("the status page shows each guarded MCP server: one up, one down as a warning that leaves the overall status ok", async ({ page }, testInfo) => {
  await signInAsOperator(page, testInfo);
  await expect(async () => {
    await page.goto("/status");
    await expect(page.getByTestId("mcp-server-counter")).toHaveAttribute("data-state", "up", { timeout: 1_000 });
  }).toPass({ timeout: 30_000 });
  const counter = page.getByTestId("mcp-server-counter");
  await expect(counter).toContainText("stdio");
  await expect(counter).toContainText(/\d+ tools/);

  const offline = page.getByTestId("mcp-server-offline");
  await expect(offline).toHaveAttribute("data-state", "down");
  await expect(offline).toContainText(OFFLINE_MCP_URL);
  await expect(offline.getByTestId("mcp-server-error")).toContainText("cannot connect");
  await expect(page.getByTestId("mcp-servers")).toContainText("1 of 2 not connected");
  await expect(page.getByTestId("overall-status")).toHaveAttribute("data-status", "ok");
  await page.getByTestId("mcp-servers").scrollIntoViewIfNeeded();
  await shot(page, testInfo, "mcp-status");
});
