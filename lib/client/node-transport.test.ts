import { getEventListeners } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { IdemgateClient } from "./idemgate-client";
import { nodeTransport } from "./node-transport";

// The client's Node transport against a node:http server that counts its connections: requests
// one after another share one keep-alive connection; an answer cut short or an abort is an error.

let server: Server;
let base: string;
let connections = 0;
/** requests whose connection closed before the server answered them */
const dropped: string[] = [];
const seen: { method: string; url: string; length: string | undefined; body: string }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (c: string) => (body += c));
    req.on("end", () => {
      seen.push({ method: req.method!, url: req.url!, length: req.headers["content-length"], body });
      if (req.url === "/cut") {
        res.writeHead(200, { "Content-Type": "application/json", "Content-Length": "100" });
        res.write('{"partial":');
        setTimeout(() => res.destroy(), 10);
        return;
      }
      if (req.url === "/slow") {
        const timer = setTimeout(() => res.end("late"), 2_000);
        res.on("close", () => {
          if (!res.writableEnded) {
            clearTimeout(timer);
            dropped.push(req.url!);
          }
        });
        return;
      }
      if (req.url === "/trickle") {
        res.writeHead(200, { "Content-Type": "text/plain" });
        res.write("first part, ");
        const timer = setTimeout(() => res.end("the rest"), 2_000);
        res.on("close", () => clearTimeout(timer));
        return;
      }
      if (req.url === "/moved" || req.url === "/away") {
        res.writeHead(308, { Location: req.url === "/moved" ? "/x" : "http://example.invalid/x" });
        res.end();
        return;
      }
      if (req.url === "/held") {
        // a reservation held by Prefer: wait answers after seconds: longer than the idle timeout (4 s)
        setTimeout(() => res.end("held"), 4_500);
        return;
      }
      if (req.url?.startsWith("/api/v1/tools/demo.write/invoke")) {
        res.writeHead(200, { "Content-Type": "application/json", "Idempotency-Key": String(req.headers["idempotency-key"]) });
        res.end(JSON.stringify({ echoed: JSON.parse(body) }));
        return;
      }
      res.writeHead(201, { "Content-Type": "application/json", "X-Two": "a" });
      res.end(JSON.stringify({ ok: true, n: seen.length }));
    });
  });
  server.on("connection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const post = (body: string | undefined, signal = new AbortController().signal) => ({ method: "POST" as const, headers: { "Content-Type": "application/json" }, body, signal });

describe("the client's node:http transport", () => {
  it("sends requests one after another on one keep-alive connection, with their length, and reads status, headers and body", async () => {
    const send = nodeTransport();
    const before = connections;
    for (let i = 0; i < 20; i++) {
      const res = await send(`${base}/x`, post(JSON.stringify({ i, text: "é" })));
      expect(res.status).toBe(201);
      expect(res.headers.get("x-two")).toBe("a");
      expect(JSON.parse(await res.text())).toMatchObject({ ok: true });
    }
    expect(connections - before).toBe(1);
    expect(seen.at(-1)).toEqual({ method: "POST", url: "/x", length: String(Buffer.byteLength('{"i":19,"text":"é"}')), body: '{"i":19,"text":"é"}' });
  });

  it("fails an answer whose connection closes before its end, and a request that is aborted", async () => {
    const send = nodeTransport();
    const cut = await send(`${base}/cut`, post("{}"));
    await expect(cut.text()).rejects.toThrow();
    const abort = new AbortController();
    const slow = send(`${base}/slow`, post("{}", abort.signal));
    setTimeout(() => abort.abort(new Error("given up")), 50);
    await expect(slow).rejects.toThrow();
    // and the next request still gets through, on a connection of its own
    expect((await send(`${base}/x`, post(undefined))).status).toBe(201);
  });

  it("ends an aborted request: rejected with the abort's reason, before or after its answer began, its connection closed", async () => {
    const send = nodeTransport();
    const given = new Error("given up");
    const abort = new AbortController();
    const slow = send(`${base}/slow`, post("{}", abort.signal));
    setTimeout(() => abort.abort(given), 50);
    await expect(slow).rejects.toBe(given);
    await expect.poll(() => dropped.includes("/slow")).toBe(true);

    const during = new AbortController();
    const trickle = await send(`${base}/trickle`, { method: "GET", headers: {}, body: undefined, signal: during.signal });
    expect(trickle.status).toBe(200);
    const text = trickle.text();
    during.abort(given);
    await expect(text).rejects.toBe(given);

    const before = new AbortController();
    before.abort(given);
    const sent = seen.length;
    await expect(send(`${base}/x`, post("{}", before.signal))).rejects.toBe(given);
    expect(seen.length).toBe(sent);
  });

  it("watches a request's signal only until its answer is read", async () => {
    const send = nodeTransport();
    const abort = new AbortController();
    const res = await send(`${base}/x`, post("{}", abort.signal));
    await res.text();
    expect(getEventListeners(abort.signal, "abort")).toHaveLength(0);
    await expect(send(`${base}/cut`, post("{}", abort.signal)).then((r) => r.text())).rejects.toThrow();
    expect(getEventListeners(abort.signal, "abort")).toHaveLength(0);
    // an abort after the answer changes nothing
    abort.abort(new Error("late"));
  });

  it("follows a 307/308 within the gateway's origin with the same method and body, and returns one to another origin", async () => {
    const send = nodeTransport();
    const moved = await send(`${base}/moved`, post('{"again":true}'));
    expect(moved.status).toBe(201);
    expect(seen.at(-1)).toMatchObject({ method: "POST", url: "/x", body: '{"again":true}' });
    const away = await send(`${base}/away`, post("{}"));
    expect(away.status).toBe(308);
  });

  it("closes idle connections only: an answer that takes longer than the idle timeout still arrives", async () => {
    const send = nodeTransport();
    const res = await send(`${base}/held`, post("{}"));
    expect(await res.text()).toBe("held");
  }, 10_000);

  it("is what IdemgateClient uses in Node when it is given no fetch: its calls share one connection", async () => {
    const client = new IdemgateClient({ baseUrl: base, token: "idg_test" });
    const before = connections;
    for (let i = 0; i < 5; i++) {
      const out = await client.invoke("demo.write", { i }, { key: `k${i}` });
      expect(out).toMatchObject({ status: 200, body: { echoed: { i } }, key: `k${i}` });
    }
    expect(connections - before).toBe(1);
  });
});
