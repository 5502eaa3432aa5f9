import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { connect, type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as invokeRoute } from "@/app/api/v1/tools/[tool]/invoke/route";
import { handleInvoke } from "@/lib/gateway/fast-invoke";
import { startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";

/**
 * A retry that carries Idempotency-Key twice must not become a new key ("order-42, order-42") and
 * run the action again: the gateway's fast path, its App Router route (which sees the two values
 * joined, as Next.js hands them over) and /mcp all refuse it with a 400 and run nothing.
 */

let gateway: McpGateway;
let server: Server;
let port: number;
let token: string;

const charges = (customerId: string) => gateway.pg.db.prisma.demoCharge.count({ where: { scope: "tenant-rk", customerId } });

/** The App Router route behind node:http as Next.js calls it: repeated headers appended to one Fetch `Headers`. */
async function appRoute(req: IncomingMessage, res: ServerResponse, tool: string): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  const request = new Request(`http://gateway.invalid/api/v1/tools/${tool}/invoke`, { method: "POST", headers, body: Buffer.concat(chunks) });
  const response = await invokeRoute(request, { params: Promise.resolve({ tool }) });
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
}

beforeAll(async () => {
  gateway = await startMcpGateway("repeated_key");
  token = await gateway.token("tenant-rk");
  server = createServer((req, res) => {
    const routed = /^\/router\/api\/v1\/tools\/([^/]+)\/invoke$/.exec(req.url ?? "");
    if (routed) {
      void appRoute(req, res, decodeURIComponent(routed[1]));
      return;
    }
    if (!handleInvoke(req, res)) res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await gateway?.close();
});

/** One HTTP/1.1 request written byte for byte (headers may repeat); the status and body of its answer. */
function rawPost(targetPort: number, path: string, headers: [string, string][], body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(targetPort, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("end", () => {
      const received = Buffer.concat(chunks);
      const split = received.indexOf("\r\n\r\n");
      const head = received.subarray(0, split).toString("latin1");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
      let payload = received.subarray(split + 4);
      if (/^transfer-encoding: chunked$/im.test(head)) {
        const parts: Buffer[] = [];
        for (let at = 0; ; ) {
          const lineEnd = payload.indexOf("\r\n", at);
          const size = parseInt(payload.subarray(at, lineEnd).toString("latin1"), 16);
          if (!size) break;
          parts.push(payload.subarray(lineEnd + 2, lineEnd + 2 + size));
          at = lineEnd + 2 + size + 2;
        }
        payload = Buffer.concat(parts);
      }
      resolve({ status, body: payload.toString("utf8") });
    });
    const lines = [`POST ${path} HTTP/1.1`, `Host: 127.0.0.1:${targetPort}`, "Connection: close", `Content-Length: ${Buffer.byteLength(body)}`];
    for (const [name, value] of headers) lines.push(`${name}: ${value}`);
    socket.write(lines.join("\r\n") + "\r\n\r\n" + body);
  });
}

const chargeBody = (customerId: string) => JSON.stringify({ customerId, amountCents: 1250, currency: "EUR" });
const auth = (): [string, string] => ["Authorization", `Bearer ${token}`];
const json: [string, string] = ["Content-Type", "application/json"];

describe.each([
  ["fast path", "/api/v1/tools/payments.charge/invoke"],
  ["App Router route", "/router/api/v1/tools/payments.charge/invoke"],
])("the gateway's %s", (_name, path) => {
  it("runs a key once, and answers a retry carrying Idempotency-Key twice with 400 invalid_header; nothing runs again", async () => {
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const key = `order-${randomUUID().slice(0, 8)}`;
    const first = await rawPost(port, path, [auth(), json, ["Idempotency-Key", key]], chargeBody(customerId));
    expect(first.status).toBe(200);
    expect(await charges(customerId)).toBe(1);

    const repeated = await rawPost(port, path, [auth(), json, ["Idempotency-Key", key], ["Idempotency-Key", key]], chargeBody(customerId));
    expect(repeated.status).toBe(400);
    expect(JSON.parse(repeated.body)).toMatchObject({ type: "/problems/invalid_header", status: 400, detail: expect.stringMatching(/send it once/) });
    expect(await charges(customerId)).toBe(1);
    expect(await gateway.runtime.store.get("tenant-rk", `${key}, ${key}`)).toBeNull();
  });

  it("still takes a key holding a \",\" sent once as a quoted string, and replays it", async () => {
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const key = `a,b-${randomUUID().slice(0, 8)}`;
    const send = () => rawPost(port, path, [auth(), json, ["Idempotency-Key", `"${key}"`]], chargeBody(customerId));
    expect((await send()).status).toBe(200);
    expect((await send()).status).toBe(200);
    expect(await charges(customerId)).toBe(1);
    expect(await gateway.runtime.store.get("tenant-rk", key)).not.toBeNull();
  });
});

describe("/mcp", () => {
  it("refuses a tools/call carrying Idempotency-Key twice as a tool error; nothing runs", async () => {
    const customerId = `cus_${randomUUID().slice(0, 8)}`;
    const key = `order-${randomUUID().slice(0, 8)}`;
    const mcpPort = Number(new URL(gateway.url).port);
    const call = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "payments.charge", arguments: JSON.parse(chargeBody(customerId)) } });
    const headers: [string, string][] = [auth(), json, ["Accept", "application/json, text/event-stream"], ["Idempotency-Key", key]];
    const first = await rawPost(mcpPort, "/mcp", headers, call);
    expect(first.status).toBe(200);
    expect(JSON.parse(first.body).result.isError).toBeFalsy();
    expect(await charges(customerId)).toBe(1);

    const repeated = await rawPost(mcpPort, "/mcp", [...headers, ["Idempotency-Key", key]], call);
    const result = JSON.parse(repeated.body).result;
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result)).toContain("invalid_header");
    expect(await charges(customerId)).toBe(1);
  });
});
