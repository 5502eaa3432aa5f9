import { request as httpRequest } from "node:http";
import { expect, test, type APIRequestContext, type APIResponse } from "./fixtures";
import { UpstreamService } from "./upstream-service";
import { seededCredentials, signInAsOperator } from "./auth";
import { METRICS_TOKEN } from "./accounts";

// Black-box tests of the gateway's HTTP contract against the production build, in both server
// configurations (embedded PGlite; Redis + PostgreSQL).

const charge = (over: Record<string, unknown> = {}) => ({ customerId: `cus_${Math.random().toString(36).slice(2, 8)}`, amountCents: 1_999, currency: "EUR", ...over });
const key = () => `e2e-${crypto.randomUUID()}`;

function invoke(request: APIRequestContext, token: string, tool: string, body: unknown, headers: Record<string, string> = {}): Promise<APIResponse> {
  return request.post(`/api/v1/tools/${tool}/invoke`, {
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...headers },
    // a Buffer goes out byte for byte (Playwright would JSON-encode a string again)
    data: Buffer.from(typeof body === "string" ? body : JSON.stringify(body)),
  });
}

async function expectProblem(res: APIResponse, status: number, code: string): Promise<Record<string, unknown>> {
  expect(res.status(), await res.text()).toBe(status);
  expect(res.headers()["content-type"]).toContain("application/problem+json");
  const body = await res.json();
  expect(body).toMatchObject({ type: `/problems/${code}`, status });
  expect(typeof body.title).toBe("string");
  expect(typeof body.detail).toBe("string");
  return body;
}

test.describe("gateway contract", () => {
  let token: string;
  test.beforeAll(({}, testInfo) => {
    token = seededCredentials(testInfo).apiToken;
  });

  test("first execution, then a byte-identical replay marked Idempotent-Replayed", async ({ request }) => {
    const k = key();
    const args = charge();
    const first = await invoke(request, token, "payments.charge", args, { "idempotency-key": k });
    expect(first.status()).toBe(200);
    expect(first.headers()["idempotent-replayed"]).toBeUndefined();
    expect(first.headers()["idemgate-execution-id"]).toBeTruthy();
    const body = await first.body();
    expect(JSON.parse(body.toString())).toMatchObject({ customerId: args.customerId, amountCents: 1_999, currency: "EUR" });

    // same action, arguments in another order, key as an RFC 8941 string: the same request
    const reordered = { currency: "EUR", amountCents: 1_999, customerId: args.customerId };
    const again = await invoke(request, token, "payments.charge", reordered, { "idempotency-key": `"${k}"` });
    expect(again.status()).toBe(200);
    expect(again.headers()["idempotent-replayed"]).toBe("true");
    expect((await again.body()).equals(body)).toBe(true);

    const list = await invoke(request, token, "payments.list_charges", { customerId: args.customerId });
    expect((await list.json()).charges).toHaveLength(1);
  });

  test("reads need no key and are never gated", async ({ request }) => {
    const res = await invoke(request, token, "payments.get_balance", { customerId: "cus_nobody" });
    expect(res.status()).toBe(200);
    expect(await res.json()).toEqual({ balanceCents: 0 });
    expect(res.headers()["idempotent-replayed"]).toBeUndefined();
  });

  test("400 for a keyless write, an invalid key, invalid arguments and malformed JSON", async ({ request }) => {
    await expectProblem(await invoke(request, token, "payments.charge", charge()), 400, "missing_key");
    await expectProblem(await invoke(request, token, "payments.charge", charge(), { "idempotency-key": "x".repeat(256) }), 400, "invalid_key");
    await expectProblem(await invoke(request, token, "payments.charge", charge(), { "idempotency-key": "fallback:abc" }), 400, "invalid_key");
    const invalid = await expectProblem(await invoke(request, token, "payments.charge", charge({ amountCents: -5 }), { "idempotency-key": key() }), 400, "invalid_arguments");
    expect(invalid.errors).toEqual(expect.arrayContaining([expect.objectContaining({ path: "amountCents" })]));
    await expectProblem(await invoke(request, token, "payments.charge", '{"customerId": ', { "idempotency-key": key() }), 400, "invalid_json");
  });

  test("keyless calls to a fallback tool are deduplicated by their arguments", async ({ request }) => {
    const title = `printer on fire ${crypto.randomUUID()}`;
    const a = await invoke(request, token, "tickets.create", { title });
    const b = await invoke(request, token, "tickets.create", { title });
    expect(a.status()).toBe(200);
    expect(b.headers()["idempotent-replayed"]).toBe("true");
    expect(await b.json()).toEqual(await a.json());
  });

  test("401 without or with a wrong token, 404 for an unknown tool, 413 for a large body", async ({ request }) => {
    await expectProblem(await request.post("/api/v1/tools/payments.charge/invoke", { data: charge() }), 401, "unauthorized");
    await expectProblem(await invoke(request, "idg_not-a-real-token", "payments.charge", charge(), { "idempotency-key": key() }), 401, "unauthorized");
    await expectProblem(await invoke(request, token, "payments.nope", {}, { "idempotency-key": key() }), 404, "unknown_tool");
    const big = JSON.stringify({ ...charge(), description: "x".repeat(1024 * 1024 + 10) });
    await expectProblem(await invoke(request, token, "payments.charge", big, { "idempotency-key": key() }), 413, "payload_too_large");
  });

  test("409 with Retry-After while the first call runs; 422 for other arguments", async ({ request }) => {
    const k = key();
    const args = charge({ simulate: { latencyMs: 1_500 } });
    const slow = invoke(request, token, "payments.charge", args, { "idempotency-key": k });
    await new Promise((r) => setTimeout(r, 300));
    const busy = await invoke(request, token, "payments.charge", args, { "idempotency-key": k });
    const problem = await expectProblem(busy, 409, "conflict");
    expect(Number(busy.headers()["retry-after"])).toBeGreaterThanOrEqual(1);
    expect(problem).toMatchObject({ key: k, state: "inflight" });
    expect((await slow).status()).toBe(200);
    await expectProblem(await invoke(request, token, "payments.charge", { ...args, amountCents: 1 }, { "idempotency-key": k }), 422, "mismatch");
  });

  test("a declined card is final: stored and replayed; a tool error releases the key", async ({ request }) => {
    const k = key();
    const declined = charge({ simulate: { outcome: "decline" } });
    const a = await invoke(request, token, "payments.charge", declined, { "idempotency-key": k });
    expect(a.status()).toBe(402);
    const b = await invoke(request, token, "payments.charge", declined, { "idempotency-key": k });
    expect(b.status()).toBe(402);
    expect(b.headers()["idempotent-replayed"]).toBe("true");

    const e = key();
    await expectProblem(await invoke(request, token, "payments.charge", charge({ customerId: "cus_flaky", simulate: { outcome: "error" } }), { "idempotency-key": e }), 502, "tool_failed");
    // the key was released: the same key with working arguments runs (other args would be a new action, but the key is free)
    expect((await invoke(request, token, "payments.charge", charge({ customerId: "cus_flaky" }), { "idempotency-key": e })).status()).toBe(200);
  });

  test("a crash after the side effect leaves the key stuck: 409 with its own problem type", async ({ request }) => {
    const k = key();
    const args = charge({ simulate: { outcome: "crash_after_effect" } });
    await expectProblem(await invoke(request, token, "payments.charge", args, { "idempotency-key": k }), 500, "abandoned");
    await expectProblem(await invoke(request, token, "payments.charge", args, { "idempotency-key": k }), 409, "conflict");
    await new Promise((r) => setTimeout(r, 3_200)); // the e2e servers' demo lease is 3 s
    const stuck = await expectProblem(await invoke(request, token, "payments.charge", args, { "idempotency-key": k }), 409, "stuck");
    expect(stuck.state).toBe("stuck");
  });

  test("200 concurrent charges with one key: one charge, every other answer a replay or a 409", async ({ request }) => {
    const k = key();
    const args = charge();
    const responses = await Promise.all(Array.from({ length: 200 }, () => invoke(request, token, "payments.charge", args, { "idempotency-key": k })));
    const statuses = responses.map((r) => r.status());
    expect(statuses.every((s) => s === 200 || s === 409), statuses.join(",")).toBe(true);
    const fresh = responses.filter((r) => r.status() === 200 && r.headers()["idempotent-replayed"] !== "true");
    expect(fresh).toHaveLength(1);
    const list = await invoke(request, token, "payments.list_charges", { customerId: args.customerId });
    expect((await list.json()).charges).toHaveLength(1);
  });

  test("GET /api/metrics needs the metrics token or a session (a tenant's API token gets 403), and counts duplicates answered from the replay cache", async ({ request }) => {
    await expectProblem(await request.get("/api/metrics"), 401, "unauthorized");
    await expectProblem(await request.get("/api/metrics", { headers: { authorization: `Bearer ${token}` } }), 403, "forbidden");
    const cachedAnswers = async () => {
      const res = await request.get("/api/metrics", { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      expect(res.status()).toBe(200);
      expect(res.headers()["content-type"]).toContain("text/plain");
      const text = await res.text();
      expect(text).toContain("idemgate_calls_total");
      const line = text.split("\n").find((l) => l.startsWith('idemgate_cached_answers_total{tool="payments.charge"}'));
      return line ? Number(line.split(" ").pop()) : 0;
    };
    const before = await cachedAnswers();
    const k = key();
    const args = charge();
    expect((await invoke(request, token, "payments.charge", args, { "idempotency-key": k })).status()).toBe(200);
    for (let i = 0; i < 2; i++) {
      const replay = await invoke(request, token, "payments.charge", args, { "idempotency-key": k });
      expect(replay.headers()["idempotent-replayed"]).toBe("true");
    }
    // the process that completed the key answers its duplicates from memory
    expect(await cachedAnswers()).toBe(before + 2);
  });

  test("chunked bodies without Content-Length: a small one runs, an oversized one gets 413 unread", async ({}, testInfo) => {
    const url = new URL("/api/v1/tools/payments.charge/invoke", testInfo.project.use.baseURL!);
    const send = (chunks: Buffer[], k: string) =>
      new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
        const req = httpRequest(url, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": k } });
        let answered = false;
        req.on("response", (res) => {
          answered = true;
          let body = "";
          res.setEncoding("utf8");
          res.on("data", (d) => (body += d));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, type: String(res.headers["content-type"]), body }));
        });
        // the server may close the connection on the rest of a refused body once it has answered
        req.on("error", (err) => (answered ? undefined : reject(err)));
        (async () => {
          for (const chunk of chunks) if (!req.write(chunk)) await new Promise((r) => req.once("drain", r));
          req.end();
        })().catch(() => {});
      });
    const args = Buffer.from(JSON.stringify(charge()));
    const small = await send([args.subarray(0, 10), args.subarray(10)], key());
    expect(small.status, small.body).toBe(200);
    const mib = Buffer.alloc(256 * 1024, " ");
    const big = await send([Buffer.from('{"customerId":"cus_big","padding":"'), mib, mib, mib, mib, mib, Buffer.from('"}')], key());
    expect(big.status).toBe(413);
    expect(big.type).toContain("application/problem+json");
    expect(JSON.parse(big.body).type).toBe("/problems/payload_too_large");
  });
});

test.describe("tenants and tokens", () => {
  test("a key in one scope is another action in another; tokens see only their scope; revoked tokens get 401", async ({ page, request }, testInfo) => {
    const { apiToken } = seededCredentials(testInfo);
    await signInAsOperator(page, testInfo);
    const origin = new URL(testInfo.project.use.baseURL!).origin;
    const created = await page.request.post("/api/v1/tokens", { headers: { origin }, data: { scope: `tenant-${Date.now()}`, label: "e2e" } });
    expect(created.status(), await created.text()).toBe(201);
    const other = await created.json();

    const k = key();
    const args = charge();
    const a = await invoke(request, apiToken, "payments.charge", args, { "idempotency-key": k });
    const b = await invoke(request, other.token, "payments.charge", args, { "idempotency-key": k });
    expect(b.status()).toBe(200);
    expect(b.headers()["idempotent-replayed"]).toBeUndefined();
    expect((await b.json()).chargeId).not.toBe((await a.json()).chargeId);
    // the other tenant cannot see the demo scope's charges or keys
    expect((await (await invoke(request, other.token, "payments.list_charges", { customerId: args.customerId })).json()).charges).toHaveLength(1);
    await expectProblem(await request.get(`/api/v1/keys?scope=demo`, { headers: { authorization: `Bearer ${other.token}` } }), 403, "forbidden");
    const own = await request.get(`/api/v1/keys`, { headers: { authorization: `Bearer ${other.token}` } });
    expect((await own.json()).items.map((r: { scope: string }) => r.scope)).toEqual([other.scope]);
    // a token may not act as an operator
    await expectProblem(await request.post(`/api/v1/keys/${other.scope}/${encodeURIComponent(k)}/release`, { headers: { authorization: `Bearer ${other.token}` }, data: { reason: "nope" } }), 403, "forbidden");

    const revoked = await page.request.post(`/api/v1/tokens/${other.id}/revoke`, { headers: { origin }, data: { reason: "e2e revocation" } });
    expect(revoked.status()).toBe(200);
    await expectProblem(await invoke(request, other.token, "payments.charge", args, { "idempotency-key": key() }), 401, "unauthorized");
  });
});

test.describe("upstream tools", () => {
  const service = new UpstreamService();
  test.beforeAll(({}, testInfo) => service.start(testInfo.project.name));
  test.afterAll(() => service.stop());

  test("forwards a scope-bound key, stores 2xx and 4xx, releases on 429", async ({ request }, testInfo) => {
    const { apiToken } = seededCredentials(testInfo);
    const k = key();
    service.behaviour = "ok";
    const a = await invoke(request, apiToken, "billing.create_invoice", { customer: "c1" }, { "idempotency-key": k });
    const b = await invoke(request, apiToken, "billing.create_invoice", { customer: "c1" }, { "idempotency-key": k });
    expect(a.status()).toBe(201);
    expect(b.headers()["idempotent-replayed"]).toBe("true");
    expect(service.effectsOf(k)).toBe(1);
    const [effect] = service.effects.filter((e) => e.callerKey === k);
    expect(effect).toMatchObject({ scope: "demo", body: '{"customer":"c1"}' });
    // the service gets a key derived from the scope and the caller's key, never the caller's raw key
    expect(effect.forwardedKey).toMatch(/^idg_/);
    expect(effect.forwardedKey).not.toContain(k);

    const n = key();
    service.behaviour = "not_now";
    await expectProblem(await invoke(request, apiToken, "billing.create_invoice", { customer: "c2" }, { "idempotency-key": n }), 502, "tool_failed");
    service.behaviour = "ok";
    expect((await invoke(request, apiToken, "billing.create_invoice", { customer: "c2" }, { "idempotency-key": n })).status()).toBe(201);
    expect(service.effectsOf(n)).toBe(1);

    const r = key();
    service.behaviour = "reject";
    expect((await invoke(request, apiToken, "billing.create_invoice", { customer: "c3" }, { "idempotency-key": r })).status()).toBe(400);
    service.behaviour = "ok";
    const received = service.received;
    const replayed = await invoke(request, apiToken, "billing.create_invoice", { customer: "c3" }, { "idempotency-key": r });
    expect(replayed.status()).toBe(400);
    expect(replayed.headers()["idempotent-replayed"]).toBe("true");
    expect(service.received).toBe(received);
  });

  test("a 5xx after the effect or a timeout: outcome unknown, the key is held, retries never run it again", async ({ request }, testInfo) => {
    const { apiToken } = seededCredentials(testInfo);
    for (const [behaviour, status, note] of [
      ["fail_after_effect", 502, "the service answered 503"],
      ["slow_after_effect", 504, "timed out after 1500 ms"],
    ] as const) {
      const k = key();
      service.behaviour = behaviour;
      const first = await expectProblem(await invoke(request, apiToken, "billing.create_invoice", { customer: "c4" }, { "idempotency-key": k }), status, "outcome_unknown");
      expect(first).toMatchObject({ key: k, state: "unknown" });
      expect(first.detail).toContain(note);
      service.behaviour = "ok";
      for (let i = 0; i < 3; i++) {
        const retry = await expectProblem(await invoke(request, apiToken, "billing.create_invoice", { customer: "c4" }, { "idempotency-key": k }), 409, "outcome_unknown");
        expect(retry.state).toBe("unknown");
      }
      expect(service.effectsOf(k)).toBe(1);
      const detail = await request.get(`/api/v1/keys/demo/${encodeURIComponent(k)}`, { headers: { authorization: `Bearer ${apiToken}` } });
      expect(await detail.json()).toMatchObject({ state: "unknown", probeable: false, record: { outcomeNote: note } });
    }
  });
});

test("what no route serves answers with a problem: an unknown API path 404, a method the path does not take 405, oversized headers 431", async ({ request, baseURL }, testInfo) => {
  const { apiToken } = seededCredentials(testInfo);
  const auth = { authorization: `Bearer ${apiToken}` };
  // unknown paths under /api, whatever the method and whether signed in or not
  for (const path of ["/api/nothing", "/api/v1/no-such-thing", "/api/v1/keys/demo/some-key/extra/segments", "/api/v2/tools"]) {
    await expectProblem(await request.get(path), 404, "not_found");
    await expectProblem(await request.post(path, { headers: auth, data: {} }), 404, "not_found");
  }
  // a known path, a method it does not take
  await expectProblem(await request.put("/api/health"), 405, "method_not_allowed");
  await expectProblem(await request.delete("/api/v1/tools", { headers: auth }), 405, "method_not_allowed");
  await expectProblem(await request.get("/api/v1/tools/payments.charge/invoke", { headers: auth }), 405, "method_not_allowed");
  // header fields larger than the server reads: refused before any handler, with a problem body
  const answer = await new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
    const req = httpRequest(`${baseURL}/api/health`, { headers: { "x-padding": "a".repeat(20_000) } }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, type: String(res.headers["content-type"]), body }));
    });
    req.on("error", reject);
    req.end();
  });
  expect(answer.status).toBe(431);
  expect(answer.type).toContain("application/problem+json");
  expect(JSON.parse(answer.body)).toMatchObject({ type: "/problems/headers_too_large", status: 431 });
});
