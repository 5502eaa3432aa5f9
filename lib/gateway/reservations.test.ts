import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as reserveRoute } from "@/app/api/v1/tools/[tool]/reservations/route";
import { POST as completeRoute } from "@/app/api/v1/executions/[executionId]/complete/route";
import { POST as heartbeatRoute } from "@/app/api/v1/executions/[executionId]/heartbeat/route";
import { POST as releaseRoute } from "@/app/api/v1/executions/[executionId]/release/route";
import { POST as replaysRoute } from "@/app/api/v1/replays/route";
import { handleInvoke } from "@/lib/gateway/fast-invoke";
import type { OpenApiDocument } from "@/lib/tools/openapi";
import { startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";

// The reservation API over HTTP, on the gateway's fast path (node:http) and on its App Router
// routes, with the answers checked against the OpenAPI document built from the same problem table.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let gateway: McpGateway;
let server: Server;
let base: string;
let token: string;
let otherToken: string;
let doc: OpenApiDocument;

beforeAll(async () => {
  gateway = await startMcpGateway("reservations_api");
  token = await gateway.token("tenant-rv");
  otherToken = await gateway.token("tenant-other");
  doc = gateway.runtime.registry.openApiDocument();
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
const DAY_MS = 24 * 60 * 60 * 1000;
const json = (t: string, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${t}`, "content-type": "application/json", ...extra });

/** The fast path: one POST, its status, headers and JSON body. */
async function post(path: string, body: unknown, headers: Record<string, string> = json(token)) {
  const res = await fetch(base + path, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Json };
}

const reserve = (key: string, extra: Record<string, string> = {}, t = token) => post("/api/v1/tools/ledger.record/reservations", { arguments: args }, json(t, { "idempotency-key": key, ...extra }));
const settle = (id: string, action: string, body: unknown, t = token) => post(`/api/v1/executions/${id}/${action}`, body, json(t));

/** The answer's status is one the document states for that operation, naming its problem type. */
function expectDocumented(path: string, status: number, body: Json) {
  const op = (doc.paths[path].post as Json).responses as Json;
  let response = op[String(status)] as Json | undefined;
  if (response?.$ref) response = (doc.components as Json).responses[String(response.$ref).split("/").pop()!];
  expect(response, `${path}: ${status} is not in the document`).toBeDefined();
  if (typeof body.type === "string") expect(response!.description).toContain(body.type);
}

describe("the reservation API on the fast path", () => {
  it("reserves (201, intent written), completes, and answers every later reservation with the stored result", async () => {
    const key = randomUUID();
    const first = await reserve(key);
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ state: "reserved", executionId: expect.any(String), token: expect.any(Number), leaseUntil: expect.any(String), leaseMs: expect.any(Number) });
    // the rest of the lease by the server's clock: a client schedules heartbeats from it, not from its own clock
    expect(first.body.leaseMs).toBeGreaterThan(0);
    expect(Math.abs(Date.parse(first.body.leaseUntil) - Date.now() - first.body.leaseMs)).toBeLessThan(5_000);
    expect(first.headers.get("idemgate-execution-id")).toBe(first.body.executionId);
    expectDocumented("/api/v1/tools/ledger.record/reservations", 201, first.body);
    expect(await gateway.pg.db.prisma.execution.findUnique({ where: { id: first.body.executionId } })).toMatchObject({ key, outcome: null });

    const running = await reserve(key);
    expect(running.status).toBe(409);
    expect(running.body.type).toBe("/problems/conflict");
    expectDocumented("/api/v1/tools/ledger.record/reservations", 409, running.body);

    const beat = await settle(first.body.executionId, "heartbeat", { token: first.body.token });
    expect(beat).toMatchObject({ status: 200, body: { state: "reserved", leaseUntil: expect.any(String), leaseMs: expect.any(Number) } });

    const done = await settle(first.body.executionId, "complete", { token: first.body.token, body: { entryId: "e-1" } });
    expect(done).toMatchObject({ status: 200, body: { state: "done", status: 200, body: { entryId: "e-1" }, executionId: first.body.executionId } });
    expectDocumented("/api/v1/executions/{executionId}/complete", 200, done.body);
    // the rest of the tool's TTL (24 h) by the server's clock
    expect(done.body.expiresInMs).toBeGreaterThan(DAY_MS - 10_000);
    expect(done.body.expiresInMs).toBeLessThanOrEqual(DAY_MS);

    const replay = await reserve(key);
    expect(replay.status).toBe(200);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual({ state: "done", status: 200, body: { entryId: "e-1" }, executionId: first.body.executionId, expiresInMs: expect.any(Number) });
    expect(replay.body.expiresInMs).toBeLessThanOrEqual(done.body.expiresInMs);
    expect(replay.body.expiresInMs).toBeGreaterThan(DAY_MS - 20_000);
    expectDocumented("/api/v1/tools/ledger.record/reservations", 200, replay.body);
  });

  it("a result answered under another key (an advisory key's arguments window) carries no expiresInMs: no client may keep it for this key", async () => {
    const model = { "idemgate-key-source": "model" };
    const windowArgs = { ...args, memo: `window-${randomUUID()}` };
    const reserveModel = (key: string) => post("/api/v1/tools/ledger.record/reservations", { arguments: windowArgs }, json(token, { "idempotency-key": key, ...model }));
    const first = await reserveModel(randomUUID());
    expect(first.status).toBe(201);
    await settle(first.body.executionId, "complete", { token: first.body.token, body: { once: true } });
    const key = randomUUID();
    const fresh = await reserveModel(key);
    expect(fresh).toMatchObject({ status: 200, body: { state: "done", body: { once: true }, executionId: first.body.executionId } });
    expect(fresh.body).not.toHaveProperty("expiresInMs");
    // from then on the key answers like the first call, stored under its own key
    const again = await reserveModel(key);
    expect(again).toMatchObject({ status: 200, body: { state: "done", body: { once: true }, executionId: first.body.executionId, expiresInMs: expect.any(Number) } });
  });

  it("complete sent twice: 200 replaying for the same body, 409 invalid_state for another", async () => {
    const r = (await reserve(randomUUID())).body;
    await settle(r.executionId, "complete", { token: r.token, status: 402, body: { error: "declined" } });
    const again = await settle(r.executionId, "complete", { token: r.token, status: 402, body: { error: "declined" } });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    const other = await settle(r.executionId, "complete", { token: r.token, status: 200, body: { ok: true } });
    expect(other).toMatchObject({ status: 409, body: { type: "/problems/invalid_state" } });
    expectDocumented("/api/v1/executions/{executionId}/complete", 409, other.body);
  });

  it("complete sent again with its keys in another order: 200 replaying; a status outside 200–299 and 400–499 is 400 and changes nothing", async () => {
    const key = randomUUID();
    const r = (await reserve(key)).body;
    for (const status of [302, 100, 199, 300, 399, 500, 503]) {
      const refused = await settle(r.executionId, "complete", { token: r.token, status, body: { ok: true } });
      expect(refused, `status ${status}`).toMatchObject({ status: 400, body: { type: "/problems/invalid_request" } });
      expect(refused.headers.get("content-type")).toMatch(/^application\/problem\+json/);
      expectDocumented("/api/v1/executions/{executionId}/complete", 400, refused.body);
    }
    expect(await gateway.runtime.store.get("tenant-rv", key)).toMatchObject({ status: "inflight", token: r.token });
    const first = await post(`/api/v1/executions/${r.executionId}/complete`, `{"token":${r.token},"status":201,"body":{"id":"inv_1","lines":[{"sku":"a","qty":1}]}}`);
    expect(first).toMatchObject({ status: 200, body: { state: "done", status: 201 } });
    const reordered = await post(`/api/v1/executions/${r.executionId}/complete`, `{"body":{"lines":[{"qty":1,"sku":"a"}],"id":"inv_1"},"status":201,"token":${r.token}}`);
    expect(reordered).toMatchObject({ status: 200, body: { state: "done", status: 201, body: { id: "inv_1", lines: [{ sku: "a", qty: 1 }] } } });
    expect(reordered.headers.get("idempotent-replayed")).toBe("true");
  });

  it("an unknown execution id and another tenant's are the same 404; a wrong token is 409 stale_token and changes nothing", async () => {
    const key = randomUUID();
    const r = (await reserve(key)).body;
    const unknown = await settle(randomUUID(), "complete", { token: r.token, body: 1 });
    const foreign = await settle(r.executionId, "complete", { token: r.token, body: 1 }, otherToken);
    const garbage = await settle("not-an-id", "heartbeat", { token: r.token });
    for (const answer of [unknown, foreign, garbage]) {
      expect(answer.status).toBe(404);
      const { instance: _instance, ...rest } = answer.body;
      const { instance: _i, ...expected } = unknown.body;
      expect(rest).toEqual(expected);
    }
    expectDocumented("/api/v1/executions/{executionId}/complete", 404, unknown.body);
    const wrong = await settle(r.executionId, "complete", { token: r.token + 1, body: 1 });
    expect(wrong).toMatchObject({ status: 409, body: { type: "/problems/stale_token" } });
    expectDocumented("/api/v1/executions/{executionId}/complete", 409, wrong.body);
    expect(await gateway.runtime.store.get("tenant-rv", key)).toMatchObject({ status: "inflight", token: r.token });
  });

  it("refuses an oversized body (413), bad bodies (400) and a reservation of a tool Idemgate runs (400); nothing changes", async () => {
    const key = randomUUID();
    const r = (await reserve(key)).body;
    const big = await settle(r.executionId, "complete", { token: r.token, body: "x".repeat(1024 * 1024 + 10) });
    expect(big).toMatchObject({ status: 413, body: { type: "/problems/payload_too_large" } });
    expectDocumented("/api/v1/executions/{executionId}/complete", 413, big.body);
    expect(await settle(r.executionId, "complete", { token: r.token })).toMatchObject({ status: 400, body: { type: "/problems/invalid_request" } });
    expect(await settle(r.executionId, "release", { token: r.token, outcome: "maybe" })).toMatchObject({ status: 400 });
    expect(await settle(r.executionId, "heartbeat", { token: "1" })).toMatchObject({ status: 400 });
    expect(await gateway.runtime.store.get("tenant-rv", key)).toMatchObject({ status: "inflight" });

    const server = await post("/api/v1/tools/payments.charge/reservations", { arguments: { customerId: "c", amountCents: 1, currency: "EUR" } }, json(token, { "idempotency-key": randomUUID() }));
    expect(server).toMatchObject({ status: 400, body: { type: "/problems/invalid_request" } });
    expect(server.body.detail).toMatch(/invoke/);
    const invalid = await post("/api/v1/tools/ledger.record/reservations", { arguments: { account: "" } }, json(token, { "idempotency-key": randomUUID() }));
    expect(invalid).toMatchObject({ status: 400, body: { type: "/problems/invalid_arguments" } });
    const keyless = await post("/api/v1/tools/ledger.record/reservations", { arguments: args });
    expect(keyless).toMatchObject({ status: 400, body: { type: "/problems/missing_key" } });
  });

  it("release not_run frees the key (the next reservation runs), unknown holds it (409 outcome_unknown)", async () => {
    const key = randomUUID();
    const r = (await reserve(key)).body;
    expect(await settle(r.executionId, "release", { token: r.token, outcome: "not_run", note: "refused before sending" })).toMatchObject({ status: 200, body: { state: "released" } });
    const second = await reserve(key);
    expect(second.status).toBe(201);
    expect(await settle(second.body.executionId, "release", { token: second.body.token, outcome: "unknown" })).toMatchObject({ status: 200, body: { state: "unknown" } });
    const held = await reserve(key);
    expect(held).toMatchObject({ status: 409, body: { type: "/problems/outcome_unknown" } });
  });
});

describe("the reservation API on the App Router routes", () => {
  const request = (path: string, body: unknown, headers: Record<string, string>) =>
    new Request(`http://idemgate.test${path}`, { method: "POST", headers: json(token, headers), body: JSON.stringify(body) });

  it("reserves, heartbeats, completes and releases as the fast path does", async () => {
    const key = randomUUID();
    const reserved = await reserveRoute(request("/api/v1/tools/ledger.record/reservations", { arguments: args }, { "idempotency-key": key }), {
      params: Promise.resolve({ tool: "ledger.record" }),
    });
    expect(reserved.status).toBe(201);
    const r = (await reserved.json()) as Json;
    const params = { params: Promise.resolve({ executionId: r.executionId }) };
    expect((await heartbeatRoute(request(`/api/v1/executions/${r.executionId}/heartbeat`, { token: r.token }, {}), params)).status).toBe(200);
    const done = await completeRoute(request(`/api/v1/executions/${r.executionId}/complete`, { token: r.token, body: { via: "route" } }, {}), params);
    expect(await done.json()).toEqual({ state: "done", status: 200, body: { via: "route" }, executionId: r.executionId, expiresInMs: expect.any(Number) });
    const late = await releaseRoute(request(`/api/v1/executions/${r.executionId}/release`, { token: r.token, outcome: "not_run" }, {}), params);
    expect(late.status).toBe(409);
    expect(((await late.json()) as Json).type).toBe("/problems/invalid_state");
    const replay = await reserveRoute(request("/api/v1/tools/ledger.record/reservations", { arguments: args }, { "idempotency-key": key }), {
      params: Promise.resolve({ tool: "ledger.record" }),
    });
    expect(replay.status).toBe(200);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");

    // a client's report of a replay it answered from its cache, through the App Router route
    const reported = await replaysRoute(request("/api/v1/replays", { replays: [{ tool: "ledger.record", key, executionId: r.executionId, ageMs: 10, session: "route-s" }] }, {}), {
      params: Promise.resolve({}),
    });
    expect(reported.status).toBe(200);
    const counts = (await reported.json()) as Json;
    expect(counts).toEqual({ recorded: 1, ignored: 0 });
    expectDocumented("/api/v1/replays", 200, counts);
    const malformed = await replaysRoute(request("/api/v1/replays", { replays: [{ key }] }, {}), { params: Promise.resolve({}) });
    expect(malformed.status).toBe(400);
    expectDocumented("/api/v1/replays", 400, (await malformed.json()) as Json);
    await gateway.runtime.audit.flush();
    expect(await gateway.pg.db.prisma.suppression.findMany({ where: { key, session: "route-s" } })).toMatchObject([{ kind: "replay", originalExecutionId: r.executionId }]);
  });
});
