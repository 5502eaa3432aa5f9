import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ToolFailedError, ToolTimeoutError } from "@/lib/idempotency/errors";
import { FinalToolError, type ToolContext } from "@/lib/idempotency/tool";
import { upstreamRunner } from "./upstream";

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
      if (path === "/broken") return json(503, { error: "down for maintenance" });
      if (path === "/redirect") return res.writeHead(307, { location: "/ok" }).end();
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
  it("POSTs the arguments as JSON and passes the key, session and scope on", async () => {
    const run = upstreamRunner({ url: `${base}/ok?tenant=x`, timeoutMs: 1_000, headers: { authorization: "Bearer upstream-secret", "idempotency-key": "not-this" } });
    const result = await run({ amountCents: 5 }, ctx);
    expect(result).toEqual({ status: 201, body: { created: true, echo: { amountCents: 5 } } });

    expect(received).toHaveLength(1);
    const [call] = received;
    expect(call.method).toBe("POST");
    expect(call.path).toBe("/ok?tenant=x");
    expect(call.headers["content-type"]).toBe("application/json");
    expect(call.headers["idempotency-key"]).toBe("order-42");
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

  it("429 is transient: a tool failure (key released), not a stored answer", async () => {
    const err = await failure(upstreamRunner({ url: `${base}/rate-limited`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(ToolFailedError);
    expect((err as ToolFailedError).upstreamStatus).toBe(429);
  });

  it("5xx is a tool failure carrying the upstream status", async () => {
    const err = await failure(upstreamRunner({ url: `${base}/broken`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(ToolFailedError);
    expect((err as ToolFailedError).upstreamStatus).toBe(503);
    expect((err as ToolFailedError).message).toContain("503");
    expect((err as ToolFailedError).message).toContain("down for maintenance");
    expect(received).toHaveLength(1);
  });

  it("a redirect is not followed: the side effect goes nowhere unconfigured", async () => {
    const err = await failure(upstreamRunner({ url: `${base}/redirect`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(ToolFailedError);
    expect((err as ToolFailedError).upstreamStatus).toBe(307);
    expect(received.map((r) => r.path)).toEqual(["/redirect"]);
  });

  it("no answer within the timeout is a ToolTimeoutError, after one call", async () => {
    const started = performance.now();
    const err = await failure(upstreamRunner({ url: `${base}/slow`, timeoutMs: 150 })({}, ctx));
    expect(err).toBeInstanceOf(ToolTimeoutError);
    expect((err as ToolTimeoutError).timeoutMs).toBe(150);
    expect(performance.now() - started).toBeLessThan(1_500);
    expect(received).toHaveLength(1);
  });

  it("an unreachable upstream is a tool failure without status, and its URL's query stays out of the message", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));

    const err = await failure(upstreamRunner({ url: `http://127.0.0.1:${port}/x?token=secret`, timeoutMs: 1_000 })({}, ctx));
    expect(err).toBeInstanceOf(ToolFailedError);
    expect((err as ToolFailedError).upstreamStatus).toBeUndefined();
    expect((err as ToolFailedError).message).toContain("unreachable");
    expect((err as ToolFailedError).message).not.toContain("secret");
  });

  it("each call is one request: retries are the engine's business", async () => {
    const run = upstreamRunner({ url: `${base}/ok`, timeoutMs: 1_000 });
    await run({ n: 1 }, ctx);
    await run({ n: 2 }, { ...ctx, key: "order-43" });
    expect(received.map((r) => [r.headers["idempotency-key"], JSON.parse(r.body)])).toEqual([
      ["order-42", { n: 1 }],
      ["order-43", { n: 2 }],
    ]);
  });
});
