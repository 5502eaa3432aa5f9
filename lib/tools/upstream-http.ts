import http from "node:http";
import https from "node:https";
import { pipeline, type Readable } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import type { UpstreamRequest } from "./upstream-request";

/** A service's answer as sendUpstream reads it, whichever client carried the request. */
export interface UpstreamResponse {
  status: number;
  header(name: string): string | null;
  /** the body as text, or null once it passes `limit` bytes (a declared length over it: not read at all) */
  text(limit: number): Promise<string | null>;
  /** the body is not wanted */
  discard(): void;
}

/** Sends one request; rejects with the connection's error (its `code` and `syscall` say how far it got). */
export type UpstreamSend = (request: UpstreamRequest, signal: AbortSignal) => Promise<UpstreamResponse>;

/** Idle connections close before the keep-alive timeout of a Node server on its defaults (5 s). */
const IDLE_MS = 4_000;
/**
 * A connection not made within this never carried the request: it fails as a connect timeout
 * (`ETIMEDOUT` on `connect`), which frees the key, as fetch's connect timeout did. A tool's own
 * timeout, if shorter, ends the call first (then unknown).
 */
export const CONNECT_TIMEOUT_MS = 10_000;

const agents = {
  http: new http.Agent({ keepAlive: true, timeout: IDLE_MS, scheduling: "lifo" }),
  https: new https.Agent({ keepAlive: true, timeout: IDLE_MS, scheduling: "lifo" }),
};

/**
 * Requests to HTTP tools over node:http(s) with keep-alive agents. Measured against the platform's
 * fetch on the same machine (docs/benchmarks.md): about a third of its latency and CPU per call.
 * What fetch did and the outcome rules rely on is kept: redirects are not followed (a 3xx is the
 * answer), a failed connection rejects with the socket's code and system call, `Accept: *\/*` unless
 * the tool sets its own, and an answer compressed anyway (gzip, deflate, br) is decoded; it asks for
 * `Accept-Encoding: identity` unless the tool's headers say otherwise.
 */
export const nodeSend: UpstreamSend = (request, signal) =>
  new Promise<UpstreamResponse>((resolve, reject) => {
    const url = new URL(request.url);
    const secure = url.protocol === "https:";
    const headers: Record<string, string> = {};
    request.headers.forEach((value, name) => {
      headers[name] = value;
    });
    headers.accept ??= "*/*";
    headers["accept-encoding"] ??= "identity";
    if (request.body !== undefined) headers["content-length"] = String(Buffer.byteLength(request.body));
    const req = (secure ? https : http).request(url, { method: request.method, headers, agent: secure ? agents.https : agents.http, signal }, (res) =>
      resolve(nodeResponse(res)),
    );
    req.setNoDelay(true);
    req.on("socket", (socket) => {
      if (!socket.connecting) return;
      const timer = setTimeout(
        () => req.destroy(Object.assign(new Error(`no connection within ${CONNECT_TIMEOUT_MS} ms`), { code: "ETIMEDOUT", syscall: "connect" })),
        CONNECT_TIMEOUT_MS,
      );
      timer.unref();
      socket.once("connect", () => clearTimeout(timer));
      socket.once("close", () => clearTimeout(timer));
    });
    req.on("error", reject);
    req.end(request.body);
  });

function nodeResponse(res: http.IncomingMessage): UpstreamResponse {
  return {
    status: res.statusCode ?? 0,
    header: (name) => {
      const value = res.headers[name.toLowerCase()];
      return value === undefined ? null : Array.isArray(value) ? value.join(", ") : value;
    },
    text: (limit) => readCapped(res, limit),
    discard: () => res.destroy(),
  };
}

async function readCapped(res: http.IncomingMessage, limit: number): Promise<string | null> {
  const declared = Number(res.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) {
    res.destroy();
    return null;
  }
  const body = decoded(res);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      body.destroy();
      res.destroy();
      return null;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size).toString("utf8");
}

/** The body as the service meant it: decoded when it came compressed; an unknown coding as sent. */
function decoded(res: http.IncomingMessage): Readable {
  const coding = (res.headers["content-encoding"] ?? "").trim().toLowerCase();
  const decoder =
    coding === "gzip" || coding === "x-gzip" ? createGunzip() : coding === "deflate" ? createInflate() : coding === "br" ? createBrotliDecompress() : null;
  if (decoder === null) return res;
  return pipeline(res, decoder, () => {});
}
