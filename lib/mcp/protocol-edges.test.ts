import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import { stdioBridgeSession } from "@/test/support/stdio-bridge-session";

// Edges of Idemgate's MCP protocol, on the wire (raw JSON-RPC, as any client's SDK would read it):
// the /mcp route behind node:http over a real runtime (PostgreSQL), and the stdio bridge in this
// process, forwarding to it.

let gateway: McpGateway;
let token: string;

beforeAll(async () => {
  gateway = await startMcpGateway("mcp_edges");
  token = await gateway.token("tenant-e");
});

afterAll(async () => {
  await gateway?.close();
});

async function post(message: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(gateway.url, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify(message),
  });
  return { status: res.status, body: await res.json() };
}

const toolsCall = (params: unknown) => ({ jsonrpc: "2.0", id: 1, method: "tools/call", params });

it("Prefer: wait=0 answers a duplicate of a running call at once (in progress), instead of holding it 10 s", async () => {
  const key = `wait0-${randomUUID()}`;
  const args = { customerId: `cus_${randomUUID().slice(0, 8)}`, amountCents: 100, currency: "EUR", simulate: { latencyMs: 4_000 } };
  const slow = post(toolsCall({ name: "payments.charge", arguments: args, idempotencyKey: key }));
  // the first call holds the key before its duplicate is sent
  while (!(await gateway.runtime.store.get("tenant-e", key))) await new Promise((r) => setTimeout(r, 50));
  const started = Date.now();
  const duplicate = await post(toolsCall({ name: "payments.charge", arguments: args, idempotencyKey: key }), { Prefer: "wait=0" });
  expect(Date.now() - started).toBeLessThan(2_000);
  expect(duplicate.body.result).toMatchObject({ isError: true, structuredContent: { type: "/problems/conflict", key } });
  expect((await slow).body.result.isError).toBeFalsy();
});

it("answers tools/call without a name, or with arguments that are not an object, with -32602 and a readable message", async () => {
  const cases: [unknown, RegExp][] = [
    [{ arguments: {} }, /^tools\/call needs params\.name/],
    [{ name: "payments.charge", arguments: "customerId=c" }, /^the arguments of payments\.charge must be an object of named arguments, not a string$/],
    [{ name: "payments.charge", arguments: [1, 2] }, /not an array$/],
  ];
  for (const [params, message] of cases) {
    const { body } = await post(toolsCall(params));
    expect(body.error).toEqual({ code: -32602, message: expect.stringMatching(message) });
  }
  // an unknown tool's message is the message alone: clients add their own "MCP error -32602: "
  expect((await post(toolsCall({ name: "payments.nope", arguments: {} }))).body.error).toEqual({ code: -32602, message: "Unknown tool: payments.nope" });
});

it("the stdio bridge passes Idemgate's error on with its message as it was, and answers bad params itself alike", async () => {
  const bridge = stdioBridgeSession({ url: gateway.url, token });
  await bridge.request("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "0" } });
  bridge.notify("notifications/initialized");
  expect((await bridge.request("tools/call", { name: "payments.nope", arguments: {} })).error).toEqual({ code: -32602, message: "Unknown tool: payments.nope" });
  expect((await bridge.request("tools/call", { arguments: {} })).error).toEqual({ code: -32602, message: expect.stringMatching(/^tools\/call needs params\.name/) });
  await bridge.close();
});
