import { randomUUID } from "node:crypto";
import { Client, ProtocolError, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestPostgres } from "@/test/support/databases";
import { startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import { stdioBridgeSession } from "@/test/support/stdio-bridge-session";
import { KEY_ARGUMENT, META_KEY_FIELD } from "./tools";

// Both protocol revisions on one endpoint, with the official v2 client: `versionNegotiation: auto`
// probes with server/discover and lands on 2026-07-28 (stateless, the protocol version and client
// capabilities in each request's _meta); the default mode opens with initialize (2025-11-25).
// The same promises hold on both: one effect per key, identical replays, keyless writes refused,
// and the key taken in DESIGN.md's order.

let gateway: McpGateway;
let pg: TestPostgres;
let token: string;
const clients: Client[] = [];

type Era = "modern" | "legacy";
type Result = { content: { type: string; text?: string }[]; structuredContent?: Record<string, unknown>; isError?: boolean; _meta?: Record<string, unknown> };

async function connect(era: Era, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: "idemgate-test-v2", version: "1.0.0" }, { versionNegotiation: { mode: era === "modern" ? "auto" : "legacy" } });
  await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url), { requestInit: { headers: { Authorization: `Bearer ${token}`, ...headers } } }));
  clients.push(client);
  return client;
}

/** tools/call with `idempotencyKey`, which the client passes on as sent. */
const call = (client: Client, params: Record<string, unknown>) => client.callTool(params as never) as Promise<Result>;
const text = (result: Result) => result.content[0]?.text ?? "";
const charges = (customerId: string) => pg.db.prisma.demoCharge.count({ where: { scope: "tenant-r", customerId } });
const chargeArgs = (customerId: string, extra: Record<string, unknown> = {}) => ({ customerId, amountCents: 700, currency: "EUR", ...extra });
const resultMeta = (result: Result) => result._meta?.["io.idemgate/result"] as { key?: string; replayed?: boolean } | undefined;

beforeAll(async () => {
  gateway = await startMcpGateway("mcp_revisions");
  pg = gateway.pg;
  token = await gateway.token("tenant-r");
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await gateway?.close();
});

describe.each<[Era, string]>([
  ["modern", "2026-07-28"],
  ["legacy", "2025-11-25"],
])("the v2 client on the %s era (%s)", (era) => {
  it("connects on that era, reads the instructions, and lists the tools with their annotations", async () => {
    const client = await connect(era);
    expect(client.getProtocolEra()).toBe(era);
    expect(client.getInstructions()).toContain("params.idempotencyKey");
    const { tools } = await client.listTools();
    const charge = tools.find((t) => t.name === "payments.charge")!;
    expect(charge.annotations).toMatchObject({ readOnlyHint: false });
    expect(charge.inputSchema.properties).toHaveProperty(KEY_ARGUMENT);
    expect(charge._meta).toMatchObject({ "io.idemgate/kind": "write" });
    expect(tools.find((t) => t.name === "payments.get_balance")?.annotations).toMatchObject({ readOnlyHint: true });
  });

  it("runs a write called 5 times at once with one params.idempotencyKey once; every call gets the same content", async () => {
    const client = await connect(era);
    const key = `rev-${era}-${randomUUID()}`;
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const args = chargeArgs(customerId, { simulate: { latencyMs: 300 } });
    const results = await Promise.all(Array.from({ length: 5 }, () => call(client, { name: "payments.charge", arguments: args, idempotencyKey: key })));
    for (const result of results) {
      expect(result.isError).toBeFalsy();
      expect(text(result)).toBe(text(results[0]));
      expect(resultMeta(result)?.key).toBe(key);
    }
    expect(results.map((r) => resultMeta(r)?.replayed).sort()).toEqual([false, true, true, true, true]);
    expect(await charges(customerId)).toBe(1);
  });

  it("refuses a keyless write with a tool error saying how to send a key; nothing runs", async () => {
    const client = await connect(era);
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const result = await call(client, { name: "payments.charge", arguments: chargeArgs(customerId) });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ type: "/problems/missing_key" });
    expect(await charges(customerId)).toBe(0);
  });

  it("takes the key in DESIGN.md's order: params.idempotencyKey, then _meta, then the Idempotency-Key header, then the argument", async () => {
    const header = `hdr-${randomUUID()}`;
    const client = await connect(era, { "Idempotency-Key": header });
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const [param, meta, argument] = [`p-${randomUUID()}`, `m-${randomUUID()}`, `a-${randomUUID()}`];
    const all = await call(client, { name: "payments.charge", arguments: chargeArgs(customerId, { [KEY_ARGUMENT]: argument }), idempotencyKey: param, _meta: { [META_KEY_FIELD]: meta } });
    expect(resultMeta(all)?.key).toBe(param);
    const metaOnly = await call(client, { name: "payments.charge", arguments: chargeArgs(customerId, { [KEY_ARGUMENT]: argument }), _meta: { [META_KEY_FIELD]: meta } });
    expect(resultMeta(metaOnly)?.key).toBe(meta);
    const headerOnly = await call(client, { name: "payments.charge", arguments: chargeArgs(customerId, { [KEY_ARGUMENT]: argument }) });
    expect(resultMeta(headerOnly)?.key).toBe(header);
    const plain = await connect(era);
    const argumentOnly = await call(plain, { name: "payments.charge", arguments: chargeArgs(`${customerId}-x`, { [KEY_ARGUMENT]: argument }) });
    expect(resultMeta(argumentOnly)?.key).toBe(argument);
    // and each key ran once: a retry under the header's key is a replay
    const again = await call(client, { name: "payments.charge", arguments: chargeArgs(customerId, { [KEY_ARGUMENT]: argument }) });
    expect(resultMeta(again)).toMatchObject({ key: header, replayed: true });
    expect(await charges(customerId)).toBe(3);
  });

  it("answers an unknown tool with -32602 and a readable message", async () => {
    const client = await connect(era);
    const unknown = await call(client, { name: "payments.nope", arguments: {} }).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(ProtocolError);
    expect(unknown).toMatchObject({ code: -32602, message: expect.stringContaining("Unknown tool: payments.nope") });
  });
});

describe("2026-07-28 on the wire", () => {
  const post = async (message: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(gateway.url, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", Accept: "application/json, text/event-stream", ...headers },
      body: JSON.stringify(message),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const envelope = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientInfo": { name: "raw", version: "0" }, "io.modelcontextprotocol/clientCapabilities": {} };
  const modernHeaders = (method: string, name?: string) => ({ "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, ...(name ? { "Mcp-Name": name } : {}) });

  it("answers server/discover with the revision, the tools capability and the instructions", async () => {
    const { body } = await post({ jsonrpc: "2.0", id: 1, method: "server/discover", params: { _meta: envelope } }, modernHeaders("server/discover"));
    expect(body.result).toMatchObject({
      supportedVersions: ["2026-07-28"],
      capabilities: { tools: {} },
      resultType: "complete",
      instructions: expect.stringContaining("params.idempotencyKey"),
      _meta: { "io.modelcontextprotocol/serverInfo": { name: "idemgate" } },
    });
  });

  it("runs a bare tools/call once per params.idempotencyKey, with no initialize and no session", async () => {
    const key = `wire-${randomUUID()}`;
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const message = { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "payments.charge", arguments: chargeArgs(customerId), idempotencyKey: key, _meta: envelope } };
    const first = await post(message, modernHeaders("tools/call", "payments.charge"));
    const second = await post(message, modernHeaders("tools/call", "payments.charge"));
    expect(first.body.result).toMatchObject({ resultType: "complete" });
    expect(first.body.result.isError).toBeFalsy();
    expect(second.body.result.content).toEqual(first.body.result.content);
    expect(second.body.result._meta["io.idemgate/result"]).toMatchObject({ key, replayed: true });
    expect(await charges(customerId)).toBe(1);
  });

  it("refuses a 2025-11-25 task-augmented call on 2026-07-28 before anything runs", async () => {
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const message = { jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "payments.charge", arguments: chargeArgs(customerId), idempotencyKey: `t-${randomUUID()}`, task: {}, _meta: envelope } };
    const { body } = await post(message, modernHeaders("tools/call", "payments.charge"));
    expect(body.error).toMatchObject({ code: -32602, message: expect.stringContaining("params.task") });
    expect(await charges(customerId)).toBe(0);
  });

  it("the stdio bridge serves 2026-07-28 too: server/discover, then a tools/call retried with its key runs once", async () => {
    const bridge = stdioBridgeSession({ url: gateway.url, token });
    const discover = await bridge.request("server/discover", { _meta: envelope });
    expect(discover.result).toMatchObject({ supportedVersions: ["2026-07-28"], instructions: expect.stringContaining("idempotencyKey") });
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const params = { name: "payments.charge", arguments: chargeArgs(customerId), idempotencyKey: `bridge-${randomUUID()}`, _meta: envelope };
    const first = await bridge.request("tools/call", params);
    const retry = await bridge.request("tools/call", params);
    expect(first.result.isError).toBeFalsy();
    expect(retry.result.content).toEqual(first.result.content);
    expect(retry.result._meta["io.idemgate/result"]).toMatchObject({ key: params.idempotencyKey, replayed: true });
    expect(await charges(customerId)).toBe(1);
    const bad = await bridge.request("tools/call", { arguments: {}, _meta: envelope });
    expect(bad.error).toEqual({ code: -32602, message: expect.stringMatching(/^tools\/call needs params\.name/) });
    await bridge.close();
  });
});
