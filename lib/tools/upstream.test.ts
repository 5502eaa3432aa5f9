import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { brotliCompressSync, gzipSync } from "node:zlib";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FinalToolError, NotRunError, OutcomeUnknown, type ToolContext } from "@/lib/idempotency/tool";
import type { UpstreamConfig } from "./define-tool";
import { derivedKey, upstreamProber, upstreamRunner } from "./upstream";

interface Received {
  path: string;
  method: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A real HTTP service; each path answers differently. */
let server: Server;
let base: string;
let received: Received[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      const path = req.url ?? "/";
      received.push({ path, method: req.method ?? "", headers: req.headers, body });
      const json = (status: number, value: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(value));
      };
      if (path.startsWith("/ok")) return json(201, { created: true, echo: JSON.parse(body) });
      if (path === "/text") {
        res.writeHead(200, { "content-type": "text/plain" });
        return res.end("plain words");
      }
      if (path === "/empty") return res.writeHead(204).end();
      if (path === "/declined") return json(402, { type: "card_declined", status: 402 });
      if (path === "/rate-limited") return json(429, { error: "slow down" });
      if (path === "/not-applied") {
        res.writeHead(503, { "content-type": "application/json", "idemgate-outcome": "not-applied" });
        return res.end(JSON.stringify({ error: "maintenance, nothing done" }));
      }
      if (path === "/reset") return req.socket.destroy();
      if (path.startsWith("/status/")) {
        const outcome = path.slice("/status/".length);
        if (outcome === "applied") return json(200, { outcome: "applied", status: 201, body: { invoiceId: "inv_1" } });
        if (outcome === "garbled") return json(200, { outcome: "maybe" });
        if (outcome === "candidate") return json(200, { outcome: "unknown", note: "no invoice under this key", candidate: { status: 201, body: { invoiceId: "inv_by_customer" } } });
        if (outcome === "down") return json(500, { error: "status store down" });
        return json(200, { outcome });
      }
      if (path === "/broken") return json(503, { error: "down for maintenance" });
      if (path === "/conflict") return json(409, { error: { type: "idempotency_error" } });
      if (path.startsWith("/adyen/")) return json(422, { status: 422, errorCode: path.slice("/adyen/".length), message: "x" });
      if (path === "/redirect") return res.writeHead(307, { location: "/ok" }).end();
      // compressed whatever the request asked for
      if (path === "/gzip") return res.writeHead(201, { "content-type": "application/json", "content-encoding": "gzip" }).end(gzipSync(JSON.stringify({ zipped: "gzip" })));
      if (path === "/br") return res.writeHead(201, { "content-type": "application/json", "content-encoding": "br" }).end(brotliCompressSync(JSON.stringify({ zipped: "br" })));
      if (path === "/slow") {
        const timer = setTimeout(() => json(200, { late: true }), 2_000);
        res.on("close", () => clearTimeout(timer));
        return;
      }
      json(404, { error: "no route" });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  received = [];
});

const ctx: ToolContext = { scope: "acme", key: "order-42", session: "run-7", executionId: "exec-1" };

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to fail");
}

describe("upstreamRunner", () => {
  it("POSTs the arguments as JSON and passes a key derived from scope and key, the caller's key, session and scope on", async () => {
    const run = upstreamRunner({ url: `${base}/ok?tenant=x`, timeoutMs: 1_000, headers: { authorization: "Bearer upstream-secret", "idempotency-key": "not-this" } });
    const result = await run({ amountCents: 5 }, ctx);
    expect(result).toEqual({ status: 201, body: { created: true, echo: { amountCents: 5 } } });

    expect(received).toHaveLength(1);
    const [call] = received;
    expect(call.method).toBe("POST");
    expect(call.path).toBe("/ok?tenant=x");
    expect(call.headers["content-type"]).toBe("application/json");
    expect(call.headers["idempotency-key"]).toBe(derivedKey("acme", "order-42"));
    expect(call.headers["idemgate-key"]).toBe("order-42");
    expect(call.headers["idemgate-session"]).toBe("run-7");
    expect(call.headers["idemgate-scope"]).toBe("acme");
    expect(call.headers["idemgate-execution-id"]).toBe("exec-1");
    expect(call.headers.authorization).toBe("Bearer upstream-secret");
  });

  it("sends no key or session for a read without them", async () => {
    const run = upstreamRunner({ url: `${base}/ok`, timeoutMs: 1_000, headers: { "idempotency-key": "configured" } });
    await run({}, { scope: "acme", key: null, session: null, executionId: null });
    expect(received[0].headers["idempotency-key"]).toBeUndefined();
    expect(received[0].headers["idemgate-session"]).toBeUndefined();
  });

  it("a body that is not JSON comes back as { text }; an empty one as null", async () => {
    expect(await upstreamRunner({ url: `${base}/text`, timeoutMs: 1_000 })({}, ctx)).toEqual({ status: 200, body: { text: "plain words" } });
    expect(await upstreamRunner({ url: `${base}/empty`, timeoutMs: 1_000 })({}, ctx)).toEqual({ status: 204, body: null });
  });

  it("4xx is a final error with the upstream's status and body (stored and replayed)", async () => {
    const err = await failure(upstreamRunner({ url: `${base}/declined`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(FinalToolError);
    expect(err).toMatchObject({ status: 402, body: { type: "card_declined", status: 402 } });
    expect(received).toHaveLength(1);
  });

  it("408, 425 and 429 say 'not now': nothing was applied, the key is released", async () => {
    const err = await failure(upstreamRunner({ url: `${base}/rate-limited`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(NotRunError);
    expect((err as NotRunError).upstreamStatus).toBe(429);
  });

  it("any answer with Idemgate-Outcome: not-applied is not run, whatever its status", async () => {
    const err = await failure(upstreamRunner({ url: `${base}/not-applied`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(NotRunError);
    expect((err as NotRunError).upstreamStatus).toBe(503);
  });

  it("5xx without the service's word is an unknown outcome; the service's body stays out of the note", async () => {
    const err = await failure(upstreamRunner({ url: `${base}/broken`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(OutcomeUnknown);
    expect((err as OutcomeUnknown).note).toBe("the service answered 503");
    expect((err as OutcomeUnknown).timedOut).toBe(false);
    // the answer itself is kept with the execution, for the operator who resolves the key
    expect((err as OutcomeUnknown).answer).toEqual({ status: 503, body: JSON.stringify({ error: "down for maintenance" }) });
    expect(received).toHaveLength(1);
  });

  it("a redirect is not followed (the side effect goes nowhere unconfigured) and is an unknown outcome", async () => {
    const err = await failure(upstreamRunner({ url: `${base}/redirect`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(OutcomeUnknown);
    expect((err as OutcomeUnknown).note).toBe("the service answered 307");
    expect(received.map((r) => r.path)).toEqual(["/redirect"]);
  });

  it("asks for an uncompressed answer and decodes one compressed anyway (gzip, br)", async () => {
    expect(await upstreamRunner({ url: `${base}/gzip`, timeoutMs: 1_000 })({}, ctx)).toEqual({ status: 201, body: { zipped: "gzip" } });
    expect(received[0].headers["accept-encoding"]).toBe("identity");
    expect(await upstreamRunner({ url: `${base}/br`, timeoutMs: 1_000, headers: { "accept-encoding": "br" } })({}, ctx)).toEqual({ status: 201, body: { zipped: "br" } });
    expect(received[1].headers["accept-encoding"]).toBe("br");
  });

  it("a call its caller gives up on (the call's signal) is an unknown outcome, not a timeout", async () => {
    const caller = new AbortController();
    const pending = failure(upstreamRunner({ url: `${base}/slow`, timeoutMs: 60_000 })({}, { ...ctx, signal: caller.signal }));
    await expect.poll(() => received.length, { timeout: 5_000 }).toBe(1);
    caller.abort(new Error("the caller went away"));
    const err = await pending;
    expect(err).toBeInstanceOf(OutcomeUnknown);
    expect((err as OutcomeUnknown).timedOut).toBe(false);
  });

  it("no answer within the timeout is an unknown outcome that says so, after one call", async () => {
    const err = await failure(upstreamRunner({ url: `${base}/slow`, timeoutMs: 150 })({}, ctx));
    expect(err).toBeInstanceOf(OutcomeUnknown);
    expect(err).toMatchObject({ note: "timed out after 150 ms", timedOut: true });
    // on a busy machine the service may read the request only after the runner gave up on it: once
    await expect.poll(() => received.length, { timeout: 5_000 }).toBe(1);
  });

  it("a connection reset after the request was sent is an unknown outcome", async () => {
    const err = await failure(upstreamRunner({ url: `${base}/reset`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(OutcomeUnknown);
    expect((err as OutcomeUnknown).note).toMatch(/^the connection failed after the request was sent/);
    expect(received).toHaveLength(1);
  });

  it("a refused connection is not run: nothing was sent; the URL stays out of the message", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));

    const err = await failure(upstreamRunner({ url: `http://127.0.0.1:${port}/x?token=secret`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(NotRunError);
    expect((err as NotRunError).upstreamStatus).toBeUndefined();
    expect((err as NotRunError).message).toContain("ECONNREFUSED");
    expect((err as NotRunError).message).not.toContain("secret");
    expect((err as NotRunError).message).not.toContain(String(port));
  });

  it("a service that refuses the connection (nothing listening) is not run, through the default client too", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const err = await failure(upstreamRunner({ url: `http://127.0.0.1:${port}/charge`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(NotRunError);
    expect((err as NotRunError).message).toContain("ECONNREFUSED");
  });

  it("a connection reset after the request was sent is an unknown outcome, through the default client", async () => {
    const err = await failure(upstreamRunner({ url: `${base}/reset`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(OutcomeUnknown);
    expect((err as OutcomeUnknown).timedOut).toBe(false);
  });

  it("an unreachable host or network counts as not sent only when connecting failed, not on a connection already open", async () => {
    // what undici's fetch rejects with: TypeError("fetch failed") with the socket's error as its cause
    const failingWith = (code: string, syscall: string) => (async () => {
      throw new TypeError("fetch failed", { cause: Object.assign(new Error(`${syscall} ${code}`), { code, syscall }) });
    }) as unknown as typeof fetch;
    for (const code of ["EHOSTUNREACH", "ENETUNREACH", "ETIMEDOUT"]) {
      expect(await failure(upstreamRunner({ url: `${base}/ok`, timeoutMs: 1_000 }, failingWith(code, "connect"))({}, ctx))).toBeInstanceOf(NotRunError);
      // a keep-alive probe failing while the answer is awaited: the request may have been applied
      const midCall = await failure(upstreamRunner({ url: `${base}/ok`, timeoutMs: 1_000 }, failingWith(code, "read"))({}, ctx));
      expect(midCall).toBeInstanceOf(OutcomeUnknown);
      expect((midCall as OutcomeUnknown).note).toBe(`the connection failed after the request was sent (${code})`);
    }
    expect(await failure(upstreamRunner({ url: `${base}/ok`, timeoutMs: 1_000 }, failingWith("ENOTFOUND", "getaddrinfo"))({}, ctx))).toBeInstanceOf(NotRunError);
  });

  it("each call is one request: retries are the engine's business", async () => {
    const run = upstreamRunner({ url: `${base}/ok`, timeoutMs: 1_000 });
    await run({ n: 1 }, ctx);
    await run({ n: 2 }, { ...ctx, key: "order-43" });
    expect(received.map((r) => [r.headers["idempotency-key"], JSON.parse(r.body)])).toEqual([
      [derivedKey("acme", "order-42"), { n: 1 }],
      [derivedKey("acme", "order-43"), { n: 2 }],
    ]);
  });
});

describe("upstreamRunner with outcome overrides", () => {
  const over = (path: string, outcomes: UpstreamConfig["outcomes"], timeoutMs = 2_000) => upstreamRunner({ url: `${base}${path}`, timeoutMs, outcomes });

  it("re-classes the statuses a tool names: 409 not run or unknown instead of a stored final error", async () => {
    expect(await failure(upstreamRunner({ url: `${base}/conflict`, timeoutMs: 2_000 })({}, ctx))).toBeInstanceOf(FinalToolError);
    const notRun = await failure(over("/conflict", { "409": "not_run" })({}, ctx));
    expect(notRun).toBeInstanceOf(NotRunError);
    expect((notRun as NotRunError).upstreamStatus).toBe(409);
    expect(await failure(over("/conflict", { "409": "unknown" })({}, ctx))).toBeInstanceOf(OutcomeUnknown);
    // a 5xx a tool's documentation calls "nothing applied", recognised by the service's own body
    expect(await failure(over("/broken", { "503": { outcome: "not_run", when: { error: "down for maintenance" } } })({}, ctx))).toBeInstanceOf(NotRunError);
    // without a body to match (it may be a proxy's), or on a gateway's 502/504, a 5xx stays unknown
    expect(await failure(over("/broken", { "503": "not_run" })({}, ctx))).toBeInstanceOf(OutcomeUnknown);
    // 429 made final: stored with its body
    const final = (await failure(over("/rate-limited", { "429": "done" })({}, ctx))) as FinalToolError;
    expect(final).toBeInstanceOf(FinalToolError);
    expect(final.body).toEqual({ error: "slow down" });
  });

  it("an override with `when` applies only to answers whose JSON holds those values (Adyen's 422 errorCode 704)", async () => {
    const outcomes = { "422": { outcome: "unknown" as const, when: { errorCode: "704" } } };
    expect(await failure(over("/adyen/704", outcomes)({}, ctx))).toBeInstanceOf(OutcomeUnknown);
    const validation = (await failure(over("/adyen/101", outcomes)({}, ctx))) as FinalToolError;
    expect(validation).toBeInstanceOf(FinalToolError);
    expect(validation.body).toMatchObject({ errorCode: "101" });
  });

  it("no override turns a missing answer into not run: a timeout and a reset stay unknown", async () => {
    const every = Object.fromEntries([408, 409, 422, 429, 500, 502, 503, 504].map((code) => [String(code), "not_run" as const]));
    const slow = await failure(over("/slow", every, 200)({}, ctx));
    expect(slow).toBeInstanceOf(OutcomeUnknown);
    expect((slow as OutcomeUnknown).timedOut).toBe(true);
    expect(await failure(over("/reset", every)({}, ctx))).toBeInstanceOf(OutcomeUnknown);
  });

  it("the service's own Idemgate-Outcome: not-applied still wins over an override", async () => {
    expect(await failure(over("/not-applied", { "503": "unknown" })({}, ctx))).toBeInstanceOf(NotRunError);
  });
});

describe("derivedKey", () => {
  it("binds the key to its scope: one key string in two scopes is two keys, the same pair always the same", () => {
    expect(derivedKey("acme", "order-42")).toBe(derivedKey("acme", "order-42"));
    expect(derivedKey("acme", "order-42")).not.toBe(derivedKey("globex", "order-42"));
    // no ambiguity from where scope ends and key begins
    expect(derivedKey("a", "bc")).not.toBe(derivedKey("ab", "c"));
    expect(derivedKey("acme", "order-42")).toMatch(/^idg_[A-Za-z0-9_-]{43}$/);
  });
});

describe("upstreamProber", () => {
  const probe = (outcome: string) =>
    upstreamProber({ url: `${base}/ok`, statusUrl: `${base}/status/${outcome}`, timeoutMs: 500, headers: { authorization: "Bearer s" } })({
      scope: "acme",
      key: "order-42",
      executionId: "exec-1",
    });

  it("GETs the status URL with the call's derived key and answers what the service says", async () => {
    expect(await probe("applied")).toEqual({ outcome: "applied", status: 201, body: { invoiceId: "inv_1" } });
    expect(received[0]).toMatchObject({ method: "GET", path: "/status/applied" });
    expect(received[0].headers["idempotency-key"]).toBe(derivedKey("acme", "order-42"));
    expect(received[0].headers["idemgate-execution-id"]).toBe("exec-1");
    expect(received[0].headers.authorization).toBe("Bearer s");
    expect(await probe("not_applied")).toEqual({ outcome: "not_applied" });
    expect(await probe("unknown")).toEqual({ outcome: "unknown" });
    // a likely match it found: decides nothing, but "It happened" starts from it
    expect(await probe("candidate")).toEqual({ outcome: "unknown", note: "no invoice under this key", candidate: { status: 201, body: { invoiceId: "inv_by_customer" } } });
  });

  it("anything but a well-formed answer is unknown: only the service's word resolves or releases a key", async () => {
    expect(await probe("garbled")).toMatchObject({ outcome: "unknown" });
    expect(await probe("down")).toMatchObject({ outcome: "unknown", note: "the status probe answered 500" });
    const slow = upstreamProber({ url: `${base}/ok`, statusUrl: `${base}/slow`, timeoutMs: 100 });
    expect(await slow({ scope: "acme", key: "k", executionId: null })).toMatchObject({ outcome: "unknown", note: expect.stringMatching(/timed out/) });
  });
});
