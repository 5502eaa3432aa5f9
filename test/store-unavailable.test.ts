import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GET as listKeysRoute } from "@/app/api/v1/keys/route";
import { POST as invokeRoute } from "@/app/api/v1/tools/[tool]/invoke/route";
import { POST as mcpRoute } from "@/app/mcp/route";
import { createApiToken } from "@/lib/auth/api-tokens";
import { openDatabase, type Database } from "@/lib/db/database";
import { handleInvoke } from "@/lib/gateway/fast-invoke";
import type { KeyStore } from "@/lib/idempotency/key-store";
import type { Runtime } from "@/lib/server/runtime";
import { createRedisKeyStore } from "@/lib/store/redis/redis-key-store";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { getRegistry } from "@/lib/tools";
import { createTestPostgres, REDIS_TEST_URL, type TestPostgres } from "@/test/support/databases";
import { installTestRuntime } from "@/test/support/runtime";
import { deleteRedisPrefix } from "@/test/support/stores";
import { CuttableProxy } from "@/test/support/tcp-proxy";

/**
 * A gateway on a real HTTP port: the node:http fast path for invoke, and the App Router's route
 * handlers (invoke, the key list, MCP) behind a minimal bridge, over a runtime whose PostgreSQL
 * (and Redis) connections go through proxies the test cuts. Whatever path meets a database or
 * key store that is gone answers 503 `unavailable` with Retry-After, and nothing runs.
 */
async function serveGateway(): Promise<{ server: Server; base: string }> {
  const routes: [RegExp, (request: Request, match: RegExpExecArray) => Promise<Response>][] = [
    [/^\/app\/api\/v1\/tools\/([^/?]+)\/invoke$/, (r, m) => invokeRoute(r, { params: Promise.resolve({ tool: decodeURIComponent(m[1]) }) })],
    [/^\/api\/v1\/keys$/, (r) => listKeysRoute(r, { params: Promise.resolve({}) })],
    [/^\/mcp$/, (r) => mcpRoute(r)],
  ];
  const bodyOf = (req: IncomingMessage) =>
    new Promise<Buffer>((resolve) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => resolve(Buffer.concat(chunks)));
    });
  const server = createServer(async (req, res) => {
    if (handleInvoke(req, res)) return;
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const route = routes.map(([re, fn]) => [re.exec(url.pathname), fn] as const).find(([m]) => m);
    if (!route) {
      res.writeHead(404).end();
      return;
    }
    const body = req.method === "GET" ? undefined : await bodyOf(req);
    const headers = new Headers();
    for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
    const response = await route[1](new Request(url, { method: req.method, headers, body: body && new Uint8Array(body) }), route[0]!);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** A runtime on a PostgreSQL database reached through a proxy, and its key store (Redis through a proxy too, or SQL). */
function useGateway(kind: "redis" | "postgres") {
  const pgProxy = new CuttableProxy(0, 5432);
  const redisProxy = new CuttableProxy(0, Number(new URL(REDIS_TEST_URL).port || 6379));
  const prefix = `idgtest-unavail-${randomUUID().slice(0, 8)}`;
  const ctx = {} as { pg: TestPostgres; db: Database; store: KeyStore; runtime: Runtime; server: Server; base: string };

  beforeAll(async () => {
    ctx.pg = await createTestPostgres("unavailable");
    await pgProxy.open();
    ctx.db = await openDatabase({ url: pgProxy.through(ctx.pg.url), migrate: false, poolSize: 4 });
    if (kind === "redis") {
      await redisProxy.open();
      const store = createRedisKeyStore(redisProxy.through(REDIS_TEST_URL), { prefix });
      await store.waitUntilReady(5_000);
      ctx.store = store;
    } else {
      ctx.store = new SqlKeyStore(ctx.db);
    }
    ctx.runtime = installTestRuntime({ db: ctx.db, store: ctx.store, registry: getRegistry() });
    Object.assign(ctx, await serveGateway());
  });
  afterAll(async () => {
    ctx.server?.closeAllConnections();
    await new Promise((r) => ctx.server?.close(r));
    await pgProxy.open().catch(() => {});
    await ctx.runtime?.close();
    await ctx.db?.close();
    await pgProxy.cut();
    await redisProxy.cut();
    if (kind === "redis") await deleteRedisPrefix(prefix);
    await ctx.pg?.drop();
  });

  const token = async (scope: string) => (await createApiToken(ctx.pg.db.prisma, { scope, actor: "test" })).token;
  const send = (token: string, path: string, init: { method?: string; body?: unknown; key?: string } = {}) =>
    fetch(ctx.base + path, {
      method: init.method ?? "POST",
      headers: {
        Authorization: `Bearer ${token}`,
        ...(init.body === undefined ? {} : { "Content-Type": "application/json", Accept: "application/json, text/event-stream" }),
        ...(init.key ? { "Idempotency-Key": init.key } : {}),
      },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
  const charge = { customerId: "cus_down", amountCents: 700, currency: "EUR" };
  /** one request down each path: the fast path and the App Router's invoke (a write and a read), the key list, MCP */
  const everyPath = (t: string, key: string) => ({
    "fast path: write": () => send(t, "/api/v1/tools/payments.charge/invoke", { body: charge, key: `${key}-fast` }),
    "App Router: write": () => send(t, "/app/api/v1/tools/payments.charge/invoke", { body: charge, key: `${key}-app` }),
    "App Router: read": () => send(t, "/app/api/v1/tools/payments.list_charges/invoke", { body: { customerId: "cus_down" } }),
    "key list": () => send(t, "/api/v1/keys", { method: "GET" }),
    "MCP": () => send(t, "/mcp", { body: { jsonrpc: "2.0", id: 1, method: "tools/list", params: {} } }),
  });
  const expectUnavailable = async (name: string, res: Response) => {
    const text = await res.text();
    expect({ name, status: res.status, retryAfter: res.headers.get("retry-after"), type: res.headers.get("content-type") }).toEqual({
      name,
      status: 503,
      retryAfter: expect.stringMatching(/^[1-9]\d*$/),
      type: expect.stringMatching(/^application\/problem\+json/),
    });
    expect(JSON.parse(text)).toMatchObject({ type: "/problems/unavailable", status: 503 });
  };
  return { ctx, pgProxy, redisProxy, token, send, charge, everyPath, expectUnavailable };
}

describe.each(["redis", "postgres"] as const)("PostgreSQL cut (%s key store): 503 with Retry-After on every path, never 500", (kind) => {
  const { ctx, pgProxy, token, send, charge, everyPath, expectUnavailable } = useGateway(kind);

  it("a token not looked up yet, and one this process knows: 503 unavailable with Retry-After, and nothing runs", async () => {
    const scope = `down-${randomUUID().slice(0, 6)}`;
    const known = await token(scope);
    const fresh = await token(scope);
    // the known token is looked up (and cached) while PostgreSQL is there
    expect((await send(known, "/api/v1/keys", { method: "GET" })).status).toBe(200);

    await pgProxy.cut();
    for (const [name, request] of Object.entries(everyPath(fresh, "fresh"))) await expectUnavailable(`fresh token, ${name}`, await request());
    // a cached token gets as far as the call: its intent cannot be written
    await expectUnavailable("known token, fast path: write", await send(known, "/api/v1/tools/payments.charge/invoke", { body: charge, key: "known-fast" }));
    await pgProxy.open();

    // nothing ran, nothing is held: the same keys run now, once each
    expect(await ctx.pg.db.prisma.demoCharge.count({ where: { scope } })).toBe(0);
    for (const key of ["fresh-fast", "fresh-app", "known-fast"]) expect(await ctx.store.get(scope, key)).toBeNull();
    const again = await send(fresh, "/api/v1/tools/payments.charge/invoke", { body: charge, key: "fresh-fast" });
    expect(again.status).toBe(200);
    expect(await ctx.pg.db.prisma.demoCharge.count({ where: { scope } })).toBe(1);
  });
});

describe("Redis cut (Redis key store, PostgreSQL there): 503 with Retry-After, never 500", () => {
  const { ctx, redisProxy, token, send, charge, expectUnavailable } = useGateway("redis");

  it("the key list and a write answer 503 unavailable with Retry-After, and nothing runs", async () => {
    const scope = `rdown-${randomUUID().slice(0, 6)}`;
    const t = await token(scope);
    await redisProxy.cut();
    await expectUnavailable("key list", await send(t, "/api/v1/keys", { method: "GET" }));
    await expectUnavailable("fast path: write", await send(t, "/api/v1/tools/payments.charge/invoke", { body: charge, key: "rdown" }));
    await expectUnavailable("App Router: write", await send(t, "/app/api/v1/tools/payments.charge/invoke", { body: charge, key: "rdown-app" }));
    await redisProxy.open();
    expect(await ctx.pg.db.prisma.demoCharge.count({ where: { scope } })).toBe(0);
  });
});
