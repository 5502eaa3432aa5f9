import http from "node:http";
import https from "node:https";
import type { Transport, WireRequest, WireResponse } from "./wire";

/**
 * Idle connections are closed after this: before the keep-alive timeout of whatever answers (the
 * Idemgate server keeps an idle connection 65 s, but a proxy in front of it, or a Node server on its
 * defaults, closes one after 5 s), so a request is not sent on a connection the server is closing.
 * A request that meets one anyway fails as a network error and is retried with the same key.
 */
const IDLE_MS = 4_000;

/**
 * Requests over node:http(s) on this client's keep-alive agents: one connection per request in
 * flight, reused by the next (nothing pipelined). Each request goes out as one write (headers and
 * body), with Nagle's algorithm off so nothing waits for an acknowledgement.
 */
export function nodeTransport(): Transport {
  const agents = {
    "http:": new http.Agent({ keepAlive: true, timeout: IDLE_MS, scheduling: "lifo" }),
    "https:": new https.Agent({ keepAlive: true, timeout: IDLE_MS, scheduling: "lifo" }),
  };
  const once = (target: URL, request: WireRequest) =>
    new Promise<WireResponse>((resolve, reject) => {
      const { signal } = request;
      if (signal.aborted) return reject(signal.reason);
      // what an abort causes (a destroyed request or answer) fails with the abort's reason
      const failure = (err: unknown) => (signal.aborted ? signal.reason : err);
      const secure = target.protocol === "https:";
      const headers: Record<string, string> = { ...request.headers };
      if (request.body !== undefined) headers["Content-Length"] = String(Buffer.byteLength(request.body));
      // An abort ends the request (and frees its connection). The abort is watched here rather than
      // through http.request's `signal` option, which watches the request's streams to the end and
      // costs more per request than the rest of this transport (docs/benchmarks.md).
      const req = (secure ? https : http).request(target, { method: request.method, headers, agent: secure ? agents["https:"] : agents["http:"] }, (res) => {
        const answer = new Headers();
        const raw = res.rawHeaders;
        for (let i = 0; i + 1 < raw.length; i += 2) answer.append(raw[i], raw[i + 1]);
        const chunks: Buffer[] = [];
        const body = new Promise<string>((ok, fail) => {
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () => {
            unwatch();
            ok(chunks.length === 1 ? chunks[0].toString("utf8") : Buffer.concat(chunks).toString("utf8"));
          });
          res.on("error", (err) => {
            unwatch();
            fail(failure(err));
          });
          res.on("close", () => {
            unwatch();
            if (!res.complete) fail(failure(new Error("the connection closed before the answer ended")));
          });
        });
        body.catch(() => {});
        resolve({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? "", headers: answer, text: () => body });
      });
      const onAbort = () => req.destroy(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)));
      const unwatch = () => signal.removeEventListener("abort", onAbort);
      signal.addEventListener("abort", onAbort, { once: true });
      req.setNoDelay(true);
      req.on("error", (err) => {
        unwatch();
        reject(failure(err));
      });
      req.end(request.body);
    });
  return async (url, request) => {
    let target = new URL(url);
    for (let hop = 0; ; hop++) {
      const res = await once(target, request);
      // As fetch would: a 307 or 308 is sent again as it was. Only within the gateway's origin, so
      // the token goes nowhere else (fetch drops it on another origin, which the gateway refuses anyway).
      const location = res.headers.get("location");
      if ((res.status !== 307 && res.status !== 308) || location === null || hop >= MAX_REDIRECTS) return res;
      const next = new URL(location, target);
      if (next.origin !== target.origin) return res;
      await res.text().catch(() => "");
      target = next;
    }
  };
}

const MAX_REDIRECTS = 5;
