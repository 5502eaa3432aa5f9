import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadConfig as loadConfigFrom } from "@/lib/server/config";
import { isLoopbackAddress } from "@/lib/server/listening-address";
import { startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import { mcpOriginRefusal, type McpOriginPolicy } from "./allowed-origin";

// /mcp refuses what a web page may have sent it (DNS rebinding, a cross-site fetch) before it looks
// at the token: the route over a real runtime (PostgreSQL key store and audit log, the demo tools),
// and the rule itself for what a test server cannot be (one listening on loopback only, as
// scripts/serve.mjs reports it).

const loadConfig = (env: Record<string, string>) => loadConfigFrom(env as unknown as NodeJS.ProcessEnv);

let gateway: McpGateway;
let mcpUrl: string;
let ownOrigin: string;
let token: string;
const scope = "origin-tenant";

beforeAll(async () => {
  gateway = await startMcpGateway("mcp-origin");
  mcpUrl = gateway.url;
  ownOrigin = new URL(mcpUrl).origin;
  token = await gateway.token(scope);
});
afterAll(async () => {
  await gateway?.close();
});
afterEach(() => {
  gateway.runtime.config.mcpAllowedOrigins = [];
  gateway.runtime.config.trustedProxies = 0;
});

/** a charge under a fresh key, with these extra headers; what the tool did is counted in its own table */
async function charge(headers: Record<string, string>, withToken = true) {
  const customerId = `cus_${randomUUID()}`;
  const body = JSON.stringify({
    jsonrpc: "2.0",
    id: 7,
    method: "tools/call",
    params: { name: "payments.charge", arguments: { customerId, amountCents: 500, currency: "EUR" }, idempotencyKey: randomUUID() },
  });
  const response = await fetch(mcpUrl, {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": "2025-11-25",
      ...(withToken ? { Authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body,
  });
  const prisma = gateway.pg.db.prisma;
  return {
    status: response.status,
    body: (await response.json()) as { error?: { code: number; message: string }; result?: { isError?: boolean } },
    charges: await prisma.demoCharge.count({ where: { scope, customerId } }),
    executions: await prisma.execution.count({ where: { scope } }),
  };
}

describe("/mcp and the Origin header", () => {
  it("runs a call that names no Origin (an SDK, the stdio bridge, curl), as before", async () => {
    const before = await gateway.pg.db.prisma.execution.count({ where: { scope } });
    const r = await charge({});
    expect(r.status).toBe(200);
    expect(r.body.result?.isError).toBeFalsy();
    expect(r.charges).toBe(1);
    expect(r.executions).toBe(before + 1);
  });

  it("runs a call from the server's own origin", async () => {
    const r = await charge({ Origin: ownOrigin });
    expect(r.status).toBe(200);
    expect(r.charges).toBe(1);
  });

  it("runs a call from an origin in IDEMGATE_MCP_ALLOWED_ORIGINS, and refuses it when it is not listed", async () => {
    expect((await charge({ Origin: "http://localhost:6274" })).status).toBe(403);
    gateway.runtime.config.mcpAllowedOrigins = loadConfig({ IDEMGATE_MCP_ALLOWED_ORIGINS: " http://localhost:6274 , https://Agents.Example" }).mcpAllowedOrigins;
    const r = await charge({ Origin: "http://localhost:6274" });
    expect(r.status).toBe(200);
    expect(r.charges).toBe(1);
    expect((await charge({ Origin: "https://agents.example" })).charges).toBe(1);
    // exact origins: another port or scheme is another origin
    expect((await charge({ Origin: "http://localhost:6275" })).status).toBe(403);
    expect((await charge({ Origin: "http://agents.example" })).status).toBe(403);
  });

  it("refuses a foreign origin with 403 and a JSON-RPC error: nothing runs, nothing is audited, with or without a token", async () => {
    const before = await gateway.pg.db.prisma.execution.count({ where: { scope } });
    const keysBefore = await gateway.pg.db.prisma.idempotencyKey.count({ where: { scope } });
    for (const withToken of [true, false]) {
      const r = await charge({ Origin: "http://evil.example" }, withToken);
      expect(r.status).toBe(403);
      expect(r.body).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32000 } });
      expect(r.body.error?.message).toContain("http://evil.example");
      expect(r.charges).toBe(0);
      expect(r.executions).toBe(before);
    }
    expect(await gateway.pg.db.prisma.idempotencyKey.count({ where: { scope } })).toBe(keysBefore);
    expect(await gateway.pg.db.prisma.suppression.count({ where: { scope } })).toBe(0);
  });

  it("refuses Origin: null (a sandboxed frame, a file) and what is not an origin", async () => {
    for (const origin of ["null", "not an origin", "http://", "evil.example"]) {
      const r = await charge({ Origin: origin });
      expect(r.status, origin).toBe(403);
      expect(r.charges, origin).toBe(0);
    }
  });

  it("takes the forwarded host as its own origin only from a trusted proxy", async () => {
    const proxied = { "X-Forwarded-Host": "idemgate.example", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9", Origin: "https://idemgate.example" };
    expect((await charge(proxied)).status).toBe(403);
    gateway.runtime.config.trustedProxies = 1;
    const r = await charge(proxied);
    expect(r.status).toBe(200);
    expect(r.charges).toBe(1);
    // and then the server's Host alone is no longer what a browser reached
    expect((await charge({ ...proxied, Origin: ownOrigin })).status).toBe(403);
  });
});

describe("mcpOriginRefusal on a server that listens on loopback only", () => {
  const loopback: McpOriginPolicy = { trustedProxies: 0, allowedOrigins: [], loopbackOnly: true };
  const refused = (headers: Record<string, string>, policy = loopback) => mcpOriginRefusal(new Headers(headers), policy);

  it("refuses a Host that is not a loopback name, even with the Origin that Host makes (DNS rebinding)", () => {
    expect(refused({ host: "evil.example.com", origin: "http://evil.example.com" })).toMatch(/Invalid Host: evil.example.com/);
    expect(refused({ host: "evil.example.com" })).toMatch(/Invalid Host/);
    // the same request to a server on every interface is not refused by Host: it does not know its names
    expect(refused({ host: "evil.example.com", origin: "http://evil.example.com" }, { ...loopback, loopbackOnly: false })).toBeNull();
  });

  it("accepts localhost, 127.0.0.1 and [::1] on any port, with their own origins or none", () => {
    for (const host of ["localhost:3000", "127.0.0.1:4184", "[::1]:3000", "localhost"]) {
      expect(refused({ host }), host).toBeNull();
      expect(refused({ host, origin: `http://${host}` }), host).toBeNull();
    }
    expect(refused({ host: "localhost:3000", origin: "http://localhost:3001" })).toMatch(/Origin "http:\/\/localhost:3001"/);
  });

  it("accepts the host of an allowed origin; behind a trusted proxy it leaves Host to the proxy", () => {
    expect(refused({ host: "idemgate.local:3000" }, { ...loopback, allowedOrigins: ["http://idemgate.local:3000"] })).toBeNull();
    const proxied = { host: "127.0.0.1:3000", "x-forwarded-host": "idemgate.example", "x-forwarded-proto": "https", origin: "https://idemgate.example" };
    expect(refused(proxied, { ...loopback, trustedProxies: 1 })).toBeNull();
    expect(refused(proxied)).toMatch(/Origin/);
  });

  it("tells loopback addresses from others", () => {
    expect(["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"].every(isLoopbackAddress)).toBe(true);
    expect(["0.0.0.0", "::", "10.0.0.5", "", "localhost"].some(isLoopbackAddress)).toBe(false);
  });
});

describe("IDEMGATE_MCP_ALLOWED_ORIGINS", () => {
  it("takes exact origins, comma-separated, and refuses anything else with a readable message", () => {
    expect(loadConfig({}).mcpAllowedOrigins).toEqual([]);
    expect(loadConfig({ IDEMGATE_MCP_ALLOWED_ORIGINS: "http://localhost:6274/,https://a.example:8443" }).mcpAllowedOrigins).toEqual([
      "http://localhost:6274",
      "https://a.example:8443",
    ]);
    for (const bad of ["localhost:6274", "http://localhost:6274/inspector", "ftp://a.example", "*"]) {
      expect(() => loadConfig({ IDEMGATE_MCP_ALLOWED_ORIGINS: bad }), bad).toThrow(/IDEMGATE_MCP_ALLOWED_ORIGINS: .* is not an origin/);
    }
  });
});
