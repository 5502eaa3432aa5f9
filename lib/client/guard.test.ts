import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { handleInvoke } from "@/lib/gateway/fast-invoke";
import { startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import { IdemgateClient, type GuardWarning } from "./index";

// guard() over real HTTP against the gateway's fast path in this process (PostgreSQL key store and
// audit log): answers that are not Idemgate's, the not-applied statuses, and an operator's release
// while the function runs. The four outcomes and the packed package installed offline into an empty
// project are in test/faults/guard.test.ts, against production servers on both configurations.

let gateway: McpGateway;
let server: Server;
let token: string;
let client: IdemgateClient;
const serverUrl = () => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

beforeAll(async () => {
  gateway = await startMcpGateway("client_guard");
  token = await gateway.token("tenant-guard");
  server = createServer((req, res) => {
    if (!handleInvoke(req, res)) res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  client = new IdemgateClient({ baseUrl: serverUrl(), token, retry: { baseDelayMs: 20, maxDelayMs: 100 } });
});

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await gateway?.close();
});

describe("guard()", () => {
  const entry = (memo: string) => ({ account: "acct-guard", amountCents: 1250, currency: "EUR", memo });

  it("runs nothing on an answer that is neither a reservation nor a stored result: a proxy's error pages, a server without this API", async () => {
    for (const [status, contentType, body] of [
      [404, "text/html", "<html><body>Not Found</body></html>"],
      [413, "text/html", "<html><body>413 Request Entity Too Large</body></html>"],
      [200, "application/json", '{"ok":true}'],
      [201, "application/json", '{"state":"reserved"}'],
    ] as const) {
      const proxy = createServer((_req, res) => res.writeHead(status, { "Content-Type": contentType }).end(body));
      await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
      const behindProxy = new IdemgateClient({ baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, token, retry: { maxAttempts: 1 } });
      let ran = 0;
      const failure = await behindProxy
        .guard("ledger.record", entry("proxy"), async () => ++ran, { key: `g-${randomUUID()}` })
        .then(() => null, (err: unknown) => err);
      proxy.closeAllConnections();
      await new Promise((resolve) => proxy.close(resolve));
      expect(ran, `answer ${status} ${contentType}`).toBe(0);
      expect(failure).toBeInstanceOf(Error);
      expect((failure as Error).message).toMatch(/did not run/);
    }
  });

  it("an error with status 408, 425 or 429 says nothing was applied: released, and the retry runs", async () => {
    for (const status of [408, 425, 429]) {
      const key = `g-${randomUUID()}`;
      let runs = 0;
      const refused = Object.assign(new Error(`the payment service answered ${status}`), { status });
      await expect(client.guard("ledger.record", entry(`busy-${status}`), async () => (++runs, Promise.reject(refused)), { key })).rejects.toBe(refused);
      expect(await client.guard("ledger.record", entry(`busy-${status}`), async () => ({ runs: ++runs }), { key })).toEqual({ runs: 2 });
    }
  });

  it("an operator's release while the function runs: heartbeats refused and said so, the completion kept as a late one, the value returned", async () => {
    const key = `g-${randomUUID()}`;
    const warnings: GuardWarning[] = [];
    const short = new IdemgateClient({ baseUrl: serverUrl(), token });
    const value = await short.guard(
      "ledger.record",
      entry("released"),
      async () => {
        await gateway.runtime.engine.release({ scope: "tenant-guard", key, actor: "op", reason: "believed not to have happened", force: true });
        // the next heartbeat comes a third of the 60 s lease later; ask for one now as the timer would
        const row = await gateway.pg.db.prisma.execution.findFirst({ where: { key } });
        const res = await fetch(`${serverUrl()}/api/v1/executions/${row!.id}/heartbeat`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({ token: Number(row!.token) }),
        });
        expect(res.status).toBe(409);
        return { entryId: "late" };
      },
      { key, onWarning: (w) => warnings.push(w) },
    );
    expect(value).toEqual({ entryId: "late" });
    expect(warnings.map((w) => w.kind)).toEqual(["late_completion"]);
    await gateway.runtime.audit.flush();
    expect(await gateway.pg.db.prisma.execution.findFirst({ where: { key } })).toMatchObject({ outcome: "late_completion", resultBody: '{"entryId":"late"}' });
  });
});
