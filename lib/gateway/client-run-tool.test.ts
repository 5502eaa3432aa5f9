import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as invokeRoute } from "@/app/api/v1/tools/[tool]/invoke/route";
import { handleInvoke } from "@/lib/gateway/fast-invoke";
import { startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";

// A tool declared with runs: "client" runs in its caller's process: /invoke refuses it with a 400
// naming how it runs, on the gateway's fast path and on its App Router route alike, and reserves
// nothing.

let gateway: McpGateway;
let server: Server;
let base: string;
let token: string;

beforeAll(async () => {
  gateway = await startMcpGateway("client_run_tool");
  token = await gateway.token("tenant-cr");
  server = createServer((req, res) => {
    if (!handleInvoke(req, res)) res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await gateway?.close();
});

const args = { account: "acct-1", amountCents: 500, currency: "EUR" };

describe("POST /api/v1/tools/{client-run tool}/invoke", () => {
  it("is a 400 runs_in_client on the fast path, naming the reservation API; nothing is reserved", async () => {
    const key = randomUUID();
    const res = await fetch(`${base}/api/v1/tools/ledger.record/invoke`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": key },
      body: JSON.stringify(args),
    });
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    const body = await res.json();
    expect(body).toMatchObject({ type: "/problems/runs_in_client", status: 400 });
    expect(body.detail).toMatch(/runs in its caller's own process.*\/reservations/);
    expect(await gateway.runtime.store.get("tenant-cr", key)).toBeNull();
  });

  it("is the same 400 on the App Router route", async () => {
    const key = randomUUID();
    const res = await invokeRoute(
      new Request("http://idemgate.test/api/v1/tools/ledger.record/invoke", {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": key },
        body: JSON.stringify(args),
      }),
      { params: Promise.resolve({ tool: "ledger.record" }) },
    );
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ type: "/problems/runs_in_client" });
    expect(await gateway.runtime.store.get("tenant-cr", key)).toBeNull();
  });
});
