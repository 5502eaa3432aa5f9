// Used by scripts/serve.mjs: how long a request may take to arrive, and how many connections the
// server holds at once. A client that holds a connection without finishing its request (a body sent
// a byte now and then: a slow-loris) is cut; one connection over the cap is answered 503, not served.
import { SECURITY_HEADERS } from "../lib/http/security-headers.mjs";

const DEFAULTS = { bodyIdleTimeoutMs: 10_000, requestTimeoutMs: 120_000, maxConnections: 1_000 };

/** headersTimeout (scripts/serve.mjs): a request's whole head within 66 s, above keepAliveTimeout's 65 s. */
export const HEADERS_TIMEOUT_MS = 66_000;

function positiveInteger(env, name, fallback, min) {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer of at least ${min}, not ${JSON.stringify(raw)}`);
  return value;
}

/**
 * The limits from the environment: IDEMGATE_BODY_IDLE_TIMEOUT_MS (a request body that sends nothing
 * for so long), IDEMGATE_REQUEST_TIMEOUT_MS (a whole request, head and body; Node.js's
 * requestTimeout), IDEMGATE_MAX_CONNECTIONS (open at once). Throws on a value that is not one.
 */
export function connectionLimitsFromEnv(env = process.env) {
  return {
    bodyIdleTimeoutMs: positiveInteger(env, "IDEMGATE_BODY_IDLE_TIMEOUT_MS", DEFAULTS.bodyIdleTimeoutMs, 100),
    requestTimeoutMs: positiveInteger(env, "IDEMGATE_REQUEST_TIMEOUT_MS", DEFAULTS.requestTimeoutMs, 1_000),
    maxConnections: positiveInteger(env, "IDEMGATE_MAX_CONNECTIONS", DEFAULTS.maxConnections, 1),
  };
}

const problem = (code, title, status, detail) => JSON.stringify({ type: `/problems/${code}`, title, status, detail });

function answer(res, status, body) {
  if (res.headersSent || res.writableEnded) return;
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    "Content-Type": "application/problem+json",
    "Cache-Control": "no-store",
    "Content-Length": Buffer.byteLength(body),
    Connection: "close",
  });
  res.end(body);
}

const OVER_CAP = Symbol("idemgate.overConnectionCap");

/**
 * node:http's own options for the limits on whole requests (Node.js answers 408 through the
 * clientError listener, scripts/problem-answers.mjs), checked often enough to be near their time.
 */
export function serverOptions(limits) {
  return {
    requestTimeout: limits.requestTimeoutMs,
    headersTimeout: Math.min(HEADERS_TIMEOUT_MS, limits.requestTimeoutMs),
    connectionsCheckingInterval: Math.max(250, Math.min(30_000, Math.floor(limits.requestTimeoutMs / 8))),
  };
}

/**
 * Applies the limits to a node:http server and returns the check its request listener runs first:
 * `admit(req, res)` is false when the request was answered here (its connection is over the cap: 503
 * `server_busy`), and watches the request's body otherwise (408 `request_timeout` when it stalls)
 * until it has arrived; `admit.watching()` is how many bodies it watches.
 */
export function applyConnectionLimits(server, limits) {
  let open = 0;
  server.on("connection", (socket) => {
    if (open >= limits.maxConnections) {
      // its request is read (so the client reads the answer rather than a reset) and answered 503
      socket[OVER_CAP] = true;
      return;
    }
    open++;
    socket.once("close", () => open--);
  });

  // bodies still arriving, checked a few times per idle period: a connection whose bytes read have
  // not moved for bodyIdleTimeoutMs is answered 408 and closed (one timer for all, not one per request).
  // A request leaves the set as soon as its body has arrived: held until the next sweep (up to a
  // second), every request and its response would outlive a few young-generation collections and
  // be copied into the old generation, about 13 KB per request (docs/benchmarks.md).
  const arriving = new Map();
  function arrived() {
    arriving.delete(this);
  }
  let sweeper = null;
  const sweep = () => {
    const now = Date.now();
    for (const [req, entry] of arriving) {
      const { res } = entry;
      if (req.complete || res.writableEnded || req.socket.destroyed) {
        arriving.delete(req);
        continue;
      }
      const bytes = req.socket.bytesRead;
      // bytes read but not yet taken by the handler (it is busy, the parser paused): not the client's stall
      if (bytes !== entry.bytes || req.readableLength > 0) {
        entry.bytes = bytes;
        entry.sinceMs = now;
      } else if (now - entry.sinceMs >= limits.bodyIdleTimeoutMs) {
        arriving.delete(req);
        answer(res, 408, problem("request_timeout", "Request timeout", 408, `the request body sent nothing for ${limits.bodyIdleTimeoutMs} ms; nothing was run`));
        // whatever is reading the body learns it will not end
        res.once("finish", () => req.socket.destroy());
        if (res.writableEnded === false) req.socket.destroy();
      }
    }
    if (arriving.size === 0) {
      clearInterval(sweeper);
      sweeper = null;
    }
  };
  const everyMs = Math.max(25, Math.min(1_000, Math.floor(limits.bodyIdleTimeoutMs / 4)));

  function admit(req, res) {
    if (req.socket[OVER_CAP]) {
      answer(res, 503, problem("server_busy", "Server busy", 503, `the server holds ${limits.maxConnections} connections, its limit; nothing was run: retry shortly`));
      req.resume();
      return false;
    }
    if (!req.complete) {
      arriving.set(req, { res, bytes: req.socket.bytesRead, sinceMs: Date.now() });
      req.once("end", arrived);
      if (!sweeper) {
        sweeper = setInterval(sweep, everyMs);
        sweeper.unref();
      }
    }
    return true;
  }
  /** how many requests' bodies are watched now (for tests) */
  admit.watching = () => arriving.size;
  return admit;
}
