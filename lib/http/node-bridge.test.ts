import { createServer, request, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { bodyConsumed, completeBody, drain, nodeHeaders, readAtMost, writeAnswer } from "./node-bridge";

let server: Server | null = null;
afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

const LIMITS = { maxBytes: 1024 * 1024, maxMs: 5_000 };

/** A server that hands each request to `handle`, drains what is left of it and answers; and one request to it. */
async function exchange(handle: (req: IncomingMessage) => Promise<{ status: number; body: string }>, send: (port: number) => Promise<{ status: number; connection?: string; body: string }>) {
  server = createServer(async (req, res) => {
    const answer = await handle(req);
    const ended = await drain(req, LIMITS);
    writeAnswer(res, { status: answer.status, headers: { "Content-Type": "text/plain" }, body: answer.body }, { close: !ended });
  });
  await new Promise<void>((r) => server!.listen(0, "127.0.0.1", () => r()));
  return send((server.address() as AddressInfo).port);
}

function post(port: number, headers: [string, string][], chunks: Buffer[]) {
  return new Promise<{ status: number; connection?: string; body: string }>((resolve, reject) => {
    let answered = false;
    const grouped: Record<string, string[]> = {};
    for (const [name, value] of headers) (grouped[name] ??= []).push(value);
    // an array value goes out as one header line per value
    const req = request({ host: "127.0.0.1", port, method: "POST", path: "/", headers: grouped });
    req.on("response", (res) => {
      answered = true;
      let body = "";
      res.on("data", (d) => (body += d)).on("end", () => resolve({ status: res.statusCode!, connection: res.headers.connection, body }));
    });
    req.on("error", (err) => (answered ? undefined : reject(err)));
    (async () => {
      for (const c of chunks) if (!req.write(c)) await new Promise((r) => req.once("drain", r));
      req.end();
    })().catch(() => {});
  });
}

describe("node-bridge", () => {
  it("answers header lookups as Fetch Headers do, repeated headers joined", async () => {
    const out = await exchange(
      async (req) => {
        const h = nodeHeaders(req);
        return { status: 200, body: JSON.stringify([h.get("Authorization"), h.get("idempotency-key"), h.get("x-missing")]) };
      },
      (port) => post(port, [["Authorization", "Bearer a"], ["Authorization", "Bearer b"], ["Idempotency-Key", "k1"]], []),
    );
    const expected = new Headers([["Authorization", "Bearer a"], ["Authorization", "Bearer b"], ["Idempotency-Key", "k1"]]);
    expect(JSON.parse(out.body)).toEqual([expected.get("authorization"), expected.get("idempotency-key"), null]);
  });

  it("reads a whole body, and keeps the connection", async () => {
    const out = await exchange(
      async (req) => ({ status: 200, body: String((await readAtMost(req, 1_000)).length) }),
      (port) => post(port, [["Transfer-Encoding", "chunked"]], [Buffer.alloc(300, "a"), Buffer.alloc(300, "b")]),
    );
    expect(out).toMatchObject({ status: 200, body: "600" });
    expect(out.connection).not.toBe("close");
  });

  it("stops reading at the limit; the rest is drained so the client reads the answer, and the connection is kept", async () => {
    const out = await exchange(
      async (req) => ({ status: 413, body: String((await readAtMost(req, 100_000)).length) }),
      (port) => post(port, [["Transfer-Encoding", "chunked"]], Array.from({ length: 8 }, () => Buffer.alloc(64 * 1024, "x"))),
    );
    expect(out.status).toBe(413);
    const read = Number(out.body);
    expect(read).toBeGreaterThanOrEqual(100_000);
    expect(read).toBeLessThan(8 * 64 * 1024);
    expect(out.connection).not.toBe("close");
  });

  it("closes the connection after the answer when the rest is beyond what it drains", async () => {
    // the client may see the answer, or a reset if the close overtakes it: either way not a kept connection
    const out = await exchange(
      async (req) => ({ status: 413, body: String((await readAtMost(req, 100_000)).length) }),
      (port) => post(port, [["Transfer-Encoding", "chunked"]], Array.from({ length: 40 }, () => Buffer.alloc(64 * 1024, "x"))),
    ).catch((err: NodeJS.ErrnoException) => ({ status: 0, connection: "reset", body: String(err.code) }));
    if (out.status === 0) expect(["ECONNRESET", "EPIPE"]).toContain(out.body);
    else expect(out).toMatchObject({ status: 413, connection: "close" });
  });

  it("holds a body whole once node:http has parsed it (after the handler awaited I/O): read at once, nothing left to drain", async () => {
    const out = await exchange(
      async (req) => {
        const before = completeBody(req, 1_000);
        await new Promise((resolve) => setImmediate(resolve));
        const body = completeBody(req, 1_000);
        return { status: 200, body: JSON.stringify({ before: before === undefined, body: body?.toString(), consumed: bodyConsumed(req) }) };
      },
      (port) => post(port, [["Content-Length", "11"]], [Buffer.from('{"a":"bcd"}')]),
    );
    expect(JSON.parse(out.body)).toEqual({ before: true, body: '{"a":"bcd"}', consumed: true });
    expect(out.connection).not.toBe("close");
  });

  it("leaves a body not yet parsed, or over the limit, to readAtMost", async () => {
    const late = await exchange(
      async (req) => {
        // in the request event itself: node:http emits it once the headers are parsed
        const held = completeBody(req, 1_000);
        return { status: 200, body: JSON.stringify({ held: held === undefined ? null : held.length, read: (await readAtMost(req, 1_000)).length }) };
      },
      (port) => post(port, [["Transfer-Encoding", "chunked"]], [Buffer.alloc(300, "a"), Buffer.alloc(300, "b")]),
    );
    expect(JSON.parse(late.body)).toEqual({ held: null, read: 600 });
    const large = await exchange(
      async (req) => {
        await new Promise((resolve) => setImmediate(resolve));
        return { status: 200, body: JSON.stringify({ held: completeBody(req, 10) === undefined, read: (await readAtMost(req, 1_000)).length }) };
      },
      (port) => post(port, [["Content-Length", "100"]], [Buffer.alloc(100, "c")]),
    );
    expect(JSON.parse(large.body)).toEqual({ held: true, read: 100 });
  });
});
