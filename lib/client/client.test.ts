import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { IdemgateApiError, IdemgateClient, OutcomeUnknownError, type AttemptEvent } from "./index";

interface Seen {
  method: string;
  url: string;
  key: string | undefined;
  session: string | undefined;
  prefer: string | undefined;
  keySource: string | undefined;
  authorization: string | undefined;
  body: string;
  atMs: number;
}

type Handler = (req: IncomingMessage, res: ServerResponse, seen: Seen, index: number) => void;

let server: Server;
let baseUrl: string;
let requests: Seen[] = [];
let handler: Handler = (_req, res) => res.end();

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const seen: Seen = {
        method: req.method ?? "",
        url: req.url ?? "",
        key: req.headers["idempotency-key"] as string | undefined,
        session: req.headers["idemgate-session"] as string | undefined,
        prefer: req.headers.prefer as string | undefined,
        keySource: req.headers["idemgate-key-source"] as string | undefined,
        authorization: req.headers.authorization,
        body,
        atMs: Date.now(),
      };
      requests.push(seen);
      handler(req, res, seen, requests.length - 1);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  requests = [];
});

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

function problem(res: ServerResponse, status: number, code: string, headers: Record<string, string> = {}, extra: Record<string, unknown> = {}) {
  res.writeHead(status, { "Content-Type": "application/problem+json", ...headers });
  res.end(JSON.stringify({ type: `/problems/${code}`, title: code, status, detail: `detail of ${code}`, ...extra }));
}

/** The gateway's answer to the call whose outcome is unknown (502, or 504 after a timeout). */
function outcomeUnknown(res: ServerResponse, seen: Seen, status: 502 | 504, executionId = "exec-u1") {
  problem(res, status, "outcome_unknown", {}, { key: seen.key ?? "fallback:abc", executionId, state: "unknown" });
}

/** The gateway's answer to a duplicate of that call: 409, the record's key, no execution id. */
function outcomeUnknownDuplicate(res: ServerResponse, seen: Seen) {
  problem(res, 409, "outcome_unknown", {}, { key: seen.key, tool: "t", state: "unknown", startedAt: new Date().toISOString() });
}

async function failure(call: Promise<unknown>): Promise<IdemgateApiError> {
  const err = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(IdemgateApiError);
  return err as IdemgateApiError;
}

/** Answers as the gateway does for a fresh execution or a replay. */
function result(res: ServerResponse, seen: Seen, body: unknown, replayed = false, status = 200) {
  const headers: Record<string, string> = { "Idempotency-Key": seen.key ?? "fallback:abc" };
  if (replayed) headers["Idempotent-Replayed"] = "true";
  else headers["Idemgate-Execution-Id"] = "exec-1";
  json(res, status, body, headers);
}

const fast = { maxAttempts: 4, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 5_000 };

function client(extra: Partial<ConstructorParameters<typeof IdemgateClient>[0]> = {}) {
  return new IdemgateClient({ baseUrl, token: "idg_test", timeoutMs: 2_000, retry: fast, ...extra });
}

describe("invoke", () => {
  it("sends the token, the session, a minted key and the JSON args; returns the result", async () => {
    handler = (_req, res, seen) => result(res, seen, { chargeId: "ch_1" });
    const out = await client({ session: "conv-1" }).invoke("payments.charge", { amountCents: 5 });
    expect(out).toMatchObject({ status: 200, body: { chargeId: "ch_1" }, replayed: false, attempts: 1, executionId: "exec-1" });
    expect(requests).toHaveLength(1);
    const [r] = requests;
    expect(r).toMatchObject({ method: "POST", url: "/api/v1/tools/payments.charge/invoke", session: "conv-1", authorization: "Bearer idg_test" });
    expect(JSON.parse(r.body)).toEqual({ amountCents: 5 });
    expect(r.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(out.key).toBe(r.key);
  });

  it("mints one key per invoke() call: two calls, two keys", async () => {
    handler = (_req, res, seen) => result(res, seen, {});
    const c = client();
    const a = await c.invoke("t", {});
    const b = await c.invoke("t", {});
    expect(a.key).not.toBe(b.key);
  });

  it("an explicit key is sent as is; key: null sends none; a per-call session overrides", async () => {
    handler = (_req, res, seen) => result(res, seen, {});
    const c = client({ session: "default" });
    await c.invoke("t", {}, { key: "my-key", session: "other" });
    const keyless = await c.invoke("tickets.create", { title: "x" }, { key: null, session: null });
    expect(requests[0]).toMatchObject({ key: "my-key", session: "other" });
    expect(requests[1].key).toBeUndefined();
    expect(requests[1].session).toBeUndefined();
    expect(keyless.key).toBe("fallback:abc");
  });

  it("asks the gateway to hold a retry for a running first attempt (Prefer: wait), and marks model-minted keys", async () => {
    handler = (_req, res, seen) => result(res, seen, {});
    await client().invoke("t", {}, { key: "k1" });
    await client({ waitSeconds: 3 }).invoke("t", {}, { key: "k2", keySource: "model" });
    await client().invoke("t", {}, { key: "k3", waitSeconds: 0 });
    await client().invoke("tickets.create", {}, { key: null });
    expect(requests.map((r) => [r.prefer, r.keySource])).toEqual([
      ["wait=10", undefined],
      ["wait=3", "model"],
      [undefined, undefined],
      [undefined, undefined],
    ]);
  });

  it("reports a replay", async () => {
    handler = (_req, res, seen) => result(res, seen, { chargeId: "ch_1" }, true);
    const out = await client().invoke("t", {});
    expect(out.replayed).toBe(true);
    expect(out.executionId).toBeNull();
  });

  it("returns a tool's final error (402 decline, and a final 409 in application/json) without retrying", async () => {
    handler = (_req, res, seen) => result(res, seen, { code: "card_declined", status: 402 }, false, 402);
    const declined = await client().invoke("payments.charge", {});
    expect(declined).toMatchObject({ status: 402, body: { code: "card_declined" }, attempts: 1 });

    requests = [];
    handler = (_req, res, seen) => result(res, seen, { code: "charge_already_refunded" }, false, 409);
    const refused = await client().invoke("payments.refund", {});
    expect(refused).toMatchObject({ status: 409, attempts: 1 });
    expect(requests).toHaveLength(1);
  });
});

describe("retries", () => {
  it("retries 5xx with the same key, then succeeds", async () => {
    handler = (_req, res, seen, i) => (i < 2 ? problem(res, [503, 502][i], i === 0 ? "unavailable" : "tool_failed") : result(res, seen, { ok: true }));
    const events: AttemptEvent[] = [];
    const out = await client({ onAttempt: (e) => events.push(e) }).invoke("t", {});
    expect(out).toMatchObject({ status: 200, attempts: 3 });
    expect(requests).toHaveLength(3);
    expect(new Set(requests.map((r) => r.key)).size).toBe(1);
    expect(requests[0].key).toBe(out.key);
    expect(events.map((e) => [e.attempt, e.status, e.retryInMs === null])).toEqual([
      [1, 503, false],
      [2, 502, false],
      [3, 200, true],
    ]);
  });

  it("retries a gateway's internal error (500) with the same key", async () => {
    handler = (_req, res, seen, i) => (i === 0 ? problem(res, 500, "internal") : result(res, seen, {}, true));
    const out = await client().invoke("t", {});
    expect(out).toMatchObject({ replayed: true, attempts: 2 });
    expect(requests[1].key).toBe(requests[0].key);
  });

  it("gives up on tool_failed after maxAttempts, every attempt under the same key", async () => {
    handler = (_req, res) => problem(res, 502, "tool_failed");
    const err = await failure(client().invoke("t", {}, { key: "k-502" }));
    expect(err).not.toBeInstanceOf(OutcomeUnknownError);
    expect(err).toMatchObject({ status: 502, code: "tool_failed", attempts: 4, key: "k-502" });
    expect(requests.map((r) => r.key)).toEqual(["k-502", "k-502", "k-502", "k-502"]);
  });

  it("throws the problem once the attempts run out, carrying its body, the key and the count", async () => {
    handler = (_req, res) => problem(res, 503, "unavailable");
    const err = await client()
      .invoke("t", {}, { key: "k-503" })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdemgateApiError);
    const api = err as IdemgateApiError;
    expect(api).toMatchObject({ status: 503, type: "/problems/unavailable", title: "unavailable", detail: "detail of unavailable", key: "k-503", attempts: 4, code: "unavailable" });
    expect(api.problem).toMatchObject({ type: "/problems/unavailable", status: 503 });
    expect(requests).toHaveLength(4);
    expect(requests.every((r) => r.key === "k-503")).toBe(true);
  });

  it.each([
    [400, "missing_key"],
    [401, "unauthorized"],
    [403, "forbidden"],
    [404, "unknown_tool"],
    [413, "payload_too_large"],
    [422, "mismatch"],
  ])("never retries a %i problem", async (status, code) => {
    handler = (_req, res) => problem(res, status, code);
    const err = await client()
      .invoke("t", {})
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IdemgateApiError);
    expect((err as IdemgateApiError).status).toBe(status);
    expect((err as IdemgateApiError).attempts).toBe(1);
    expect(requests).toHaveLength(1);
  });

  it.each([
    [409, "stuck"],
    [500, "abandoned"],
    [409, "invalid_state"],
  ])("does not retry a %i %s: the key stays reserved until an operator decides", async (status, code) => {
    handler = (_req, res) => problem(res, status, code);
    const err = await failure(client().invoke("t", {}));
    expect(err).not.toBeInstanceOf(OutcomeUnknownError);
    expect(err).toMatchObject({ status, code, attempts: 1 });
    expect(requests).toHaveLength(1);
  });

  it("honours Retry-After on a 409 conflict, then gets the replay", async () => {
    handler = (_req, res, seen, i) => (i === 0 ? problem(res, 409, "conflict", { "Retry-After": "1" }) : result(res, seen, { id: 1 }, true));
    const out = await client().invoke("t", {});
    expect(out).toMatchObject({ replayed: true, attempts: 2 });
    expect(requests[1].atMs - requests[0].atMs).toBeGreaterThanOrEqual(950);
    expect(requests[1].key).toBe(requests[0].key);
  });

  it("caps a long Retry-After", async () => {
    handler = (_req, res, seen, i) => (i === 0 ? problem(res, 409, "conflict", { "Retry-After": "60" }) : result(res, seen, {}, true));
    const started = Date.now();
    await client({ retry: { ...fast, maxRetryAfterMs: 100 } }).invoke("t", {});
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(requests[1].atMs - requests[0].atMs).toBeGreaterThanOrEqual(90);
  });

  it("retries a request that timed out, with the same key, while the first still runs", async () => {
    const pending: ServerResponse[] = [];
    handler = (_req, res, seen, i) => {
      if (i === 0) pending.push(res); // the first call hangs past the client's timeout
      else result(res, seen, { id: 1 }, true);
    };
    const events: AttemptEvent[] = [];
    const out = await client({ timeoutMs: 150, onAttempt: (e) => events.push(e) }).invoke("t", {});
    expect(out).toMatchObject({ replayed: true, attempts: 2 });
    expect(requests[1].key).toBe(requests[0].key);
    expect(events[0]).toMatchObject({ attempt: 1, outcome: "timeout" });
    pending.forEach((res) => res.destroy());
  });

  it("throws a timeout problem when every attempt times out", async () => {
    handler = () => {};
    const err = (await client({ timeoutMs: 50, retry: { ...fast, maxAttempts: 2 } })
      .invoke("t", {})
      .catch((e: unknown) => e)) as IdemgateApiError;
    expect(err).toBeInstanceOf(IdemgateApiError);
    expect(err).toMatchObject({ status: 0, type: "about:blank#timeout", attempts: 2 });
    expect(requests).toHaveLength(2);
    server.closeAllConnections();
  });

  it("retries a connection broken before the answer, with the same key", async () => {
    handler = (req, res, seen, i) => (i === 0 ? req.socket.destroy() : result(res, seen, { id: 1 }, true));
    const events: AttemptEvent[] = [];
    const out = await client({ onAttempt: (e) => events.push(e) }).invoke("t", {});
    expect(out.replayed).toBe(true);
    expect(requests).toHaveLength(2);
    expect(requests[1].key).toBe(requests[0].key);
    // a pooled connection the previous test closed may fail one more attempt before reaching the server
    expect(events.slice(0, -1).every((e) => e.outcome === "network_error")).toBe(true);
    expect(events.length).toBeGreaterThanOrEqual(2);
    expect(events.at(-1)).toMatchObject({ outcome: "response", status: 200 });
  });

  it("retries network errors and throws a network problem at the end", async () => {
    const dead = new IdemgateClient({ baseUrl: "http://127.0.0.1:1", token: "idg_x", retry: { ...fast, maxAttempts: 3 } });
    const err = (await dead.invoke("t", {}).catch((e: unknown) => e)) as IdemgateApiError;
    expect(err).toMatchObject({ status: 0, type: "about:blank#network", attempts: 3 });
  });

  it("retries a proxy's non-JSON 502", async () => {
    handler = (_req, res, seen, i) => {
      if (i === 0) {
        res.writeHead(502, { "Content-Type": "text/html" });
        res.end("<h1>Bad Gateway</h1>");
      } else result(res, seen, {});
    };
    expect((await client().invoke("t", {})).attempts).toBe(2);
  });

  it.each([
    ["a JSON 504 (a load balancer's own answer)", 504, "application/json", '{"message":"Endpoint request timed out"}'],
    ["a plain-text 503", 503, "text/plain", "upstream connect error"],
    ["a problem+json 500 of a foreign type", 500, "application/problem+json", '{"type":"about:blank","title":"Internal Server Error","status":500}'],
  ])("retries %s from something in front of the gateway, with the same key", async (_name, status, type, text) => {
    handler = (_req, res, seen, i) => {
      if (i === 0) {
        res.writeHead(status, { "Content-Type": type });
        res.end(text);
      } else result(res, seen, { ok: true });
    };
    const out = await client().invoke("t", {});
    expect(out).toMatchObject({ status: 200, attempts: 2 });
    expect(requests[1].key).toBe(requests[0].key);
  });

  it("returns a 5xx that carries the gateway's headers: a stored tool result, not a proxy's page", async () => {
    handler = (_req, res, seen) => result(res, seen, { note: "resolved by an operator" }, true, 500);
    const out = await client().invoke("t", {});
    expect(out).toMatchObject({ status: 500, replayed: true, attempts: 1, body: { note: "resolved by an operator" } });
  });

  it("a caller's abort stops the retries and throws its reason", async () => {
    handler = (_req, res) => problem(res, 503, "unavailable");
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("stop")), 30);
    const err = await client({ retry: { ...fast, maxAttempts: 100, baseDelayMs: 20, maxDelayMs: 20 } })
      .invoke("t", {}, { signal: controller.signal })
      .catch((e: unknown) => e);
    expect((err as Error).message).toBe("stop");
    // a request aborted in flight may still reach the server: let it land before the next test
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(requests.length).toBeLessThan(10);
  });
});

describe("outcome unknown", () => {
  it.each([502, 504] as const)("a %i outcome_unknown is final: thrown with the key and execution id, never retried", async (status) => {
    handler = (_req, res, seen) => outcomeUnknown(res, seen, status);
    const events: AttemptEvent[] = [];
    const err = await failure(client({ onAttempt: (e) => events.push(e) }).invoke("payments.charge", {}, { key: "order-77" }));
    expect(err).toBeInstanceOf(OutcomeUnknownError);
    expect(err).toMatchObject({ name: "OutcomeUnknownError", status, key: "order-77", executionId: "exec-u1", attempts: 1, code: "outcome_unknown" });
    expect(err.problem).toMatchObject({ state: "unknown" });
    expect(requests).toHaveLength(1);
    expect(events).toMatchObject([{ attempt: 1, status, problemType: "/problems/outcome_unknown", retryInMs: null }]);
  });

  it("a 409 outcome_unknown (an earlier call's outcome is unknown) is final, without an execution id", async () => {
    handler = (_req, res, seen) => outcomeUnknownDuplicate(res, seen);
    const err = await failure(client().invoke("t", {}, { key: "order-78" }));
    expect(err).toBeInstanceOf(OutcomeUnknownError);
    expect(err).toMatchObject({ status: 409, key: "order-78", executionId: null, attempts: 1 });
    expect(requests).toHaveLength(1);
  });

  it("names the key the gateway holds for a keyless call (its fallback key)", async () => {
    handler = (_req, res, seen) => outcomeUnknown(res, seen, 502);
    const err = (await failure(client().invoke("tickets.create", {}, { key: null }))) as OutcomeUnknownError;
    expect(requests[0].key).toBeUndefined();
    expect(err.key).toBe("fallback:abc");
  });

  it("takes the execution id from the header when the problem has none", async () => {
    handler = (_req, res, seen) => problem(res, 502, "outcome_unknown", { "Idemgate-Execution-Id": "exec-h" }, { key: seen.key });
    const err = (await failure(client().invoke("t", {}))) as OutcomeUnknownError;
    expect(err.executionId).toBe("exec-h");
    expect(err.key).toBe(requests[0].key);
  });

  it("stops at outcome_unknown after a timed-out attempt: the retry learns the first one's fate and runs nothing", async () => {
    const pending: ServerResponse[] = [];
    handler = (_req, res, seen, i) => {
      if (i === 0) pending.push(res); // the first request outlives the client's timeout
      else outcomeUnknownDuplicate(res, seen);
    };
    const err = await failure(client({ timeoutMs: 150 }).invoke("t", {}));
    expect(err).toBeInstanceOf(OutcomeUnknownError);
    expect(err).toMatchObject({ status: 409, attempts: 2 });
    expect(requests).toHaveLength(2);
    expect(requests[1].key).toBe(requests[0].key);
    expect(err.key).toBe(requests[0].key);
    pending.forEach((res) => res.destroy());
  });

  it("stops at outcome_unknown after conflicts while the first call ran", async () => {
    handler = (_req, res, seen, i) => (i < 2 ? problem(res, 409, "conflict", { "Retry-After": "0" }) : outcomeUnknownDuplicate(res, seen));
    const err = await failure(client().invoke("t", {}));
    expect(err).toBeInstanceOf(OutcomeUnknownError);
    expect(err.attempts).toBe(3);
    expect(new Set(requests.map((r) => r.key)).size).toBe(1);
  });
});

describe("listTools", () => {
  it("lists the tools and sends no key to reads afterwards", async () => {
    handler = (req, res, seen) => {
      if (req.method === "GET") json(res, 200, { tools: [{ name: "tickets.list", kind: "read" }, { name: "tickets.create", kind: "write" }] });
      else json(res, 200, {});
    };
    const c = client();
    const tools = await c.listTools();
    expect(tools.map((t) => t.name)).toEqual(["tickets.list", "tickets.create"]);
    expect(requests[0]).toMatchObject({ method: "GET", url: "/api/v1/tools", authorization: "Bearer idg_test" });
    const read = await c.invoke("tickets.list", {});
    await c.invoke("tickets.create", { title: "x" });
    expect(requests[1].key).toBeUndefined();
    expect(read.key).toBeNull();
    expect(requests[2].key).toBeDefined();
  });

  it("throws a 401 problem", async () => {
    handler = (_req, res) => problem(res, 401, "unauthorized");
    await expect(client().listTools()).rejects.toMatchObject({ status: 401, code: "unauthorized" });
  });
});
