// The production server: Next.js (console, API) behind a node:http server that answers the
// gateway's routes (lib/gateway/routes.ts: POST /api/v1/tools/{tool}/invoke and the reservation and
// probe APIs) itself (lib/gateway/fast-invoke.ts).
//   node scripts/serve.mjs [-p port] [-H hostname]      (needs a build: `next build`)
// Without -p and -H it listens where PORT (default 3000) and HOST (default: every interface) say.
import http from "node:http";
import { parseArgs } from "node:util";
import { ROOT } from "./build-if-stale.mjs";
import { SECURITY_HEADERS } from "../lib/http/security-headers.mjs";
import { setForwardedProto, trustedProxyCount } from "./forwarded-proto.mjs";
import { answerUndecodablePath, undecodablePath } from "./request-path.mjs";
import { answerClientError, problemFor405 } from "./problem-answers.mjs";
import { applyConnectionLimits, connectionLimitsFromEnv, serverOptions } from "./connection-limits.mjs";

let values;
try {
  ({ values } = parseArgs({ options: { port: { type: "string", short: "p" }, hostname: { type: "string", short: "H" } }, strict: true }));
} catch (err) {
  console.error(`idemgate: ${err.message}\nusage: node scripts/serve.mjs [-p port] [-H hostname]`);
  process.exit(2);
}
let limits;
try {
  limits = connectionLimitsFromEnv();
} catch (err) {
  console.error(`idemgate: ${err.message}`);
  process.exit(1);
}
const port = Number(values.port ?? process.env.PORT ?? 3000);
if (!Number.isInteger(port) || port < 1 || port > 65535) {
  console.error(`idemgate: invalid port ${JSON.stringify(values.port ?? process.env.PORT)}`);
  process.exit(1);
}
// HOST (or -H): the address to listen on, e.g. 127.0.0.1 for this machine only; unset or blank:
// every interface, as `next start` does (what a container needs).
const hostname = values.hostname?.trim() || process.env.HOST?.trim() || undefined;
process.env.NODE_ENV = "production";
process.env.PORT = String(port);

// The platform's fetch, kept before Next.js wraps globalThis.fetch for rendering pages: calls to the
// services the gateway stands in front of go out on it (lib/http/outbound-fetch.ts)
globalThis[Symbol.for("idemgate.platformFetch")] = globalThis.fetch;

// imported once NODE_ENV is set: Next and React pick their production builds when they load
const { default: next } = await import("next");
const app = next({ dev: false, dir: ROOT, hostname: hostname ?? "localhost", port });
const handle = app.getRequestHandler();
// Runs instrumentation.ts: opens the runtime and registers the gateway's fast path.
await app.prepare();

const trustedProxies = trustedProxyCount();

const server = http.createServer(serverOptions(limits), (req, res) => {
  // over the connection cap: answered 503; a body that stalls is answered 408 (scripts/connection-limits.mjs)
  if (!admit(req, res)) return;
  // the gateway's fast path reads no X-Forwarded-Proto (and setting it would build node's headers object)
  const fastInvoke = globalThis.__idemgateFastInvoke;
  if (fastInvoke?.(req, res)) return;
  setForwardedProto(req, trustedProxies);
  // on every answer Next.js gives, also those it makes before the app's config applies (a malformed
  // URL) and the 500 below; the fast path writes them itself (lib/http/node-bridge.ts)
  for (const name in SECURITY_HEADERS) res.setHeader(name, SECURITY_HEADERS[name]);
  if (undecodablePath(req.url) && answerUndecodablePath(req, res)) return;
  problemFor405(req, res);
  handle(req, res).catch((err) => {
    console.error("idemgate: request failed", err);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});

// An idle kept-alive connection stays open for 65 s (Node's default is 5 s): a client or a load
// balancer that reuses a connection after a few idle seconds (the common 60 s of proxies) must not
// send its request just as the server closes it, which the client sees as a reset it cannot tell
// from a crash. headersTimeout (66 s, serverOptions) stays above it.
server.keepAliveTimeout = 65_000;
// A request must arrive whole within IDEMGATE_REQUEST_TIMEOUT_MS (120 s; Node's default is 300 s),
// its head within 66 s, and its body may not stall for IDEMGATE_BODY_IDLE_TIMEOUT_MS (10 s): 408.
// At most IDEMGATE_MAX_CONNECTIONS (1,000) connections are served at once; one more is answered 503.
const admit = applyConnectionLimits(server, limits);

// header fields too large (431) and unparsable requests (400) get a problem body too
server.on("clientError", answerClientError);

server.on("error", (err) => {
  console.error(`idemgate: cannot listen on ${hostname ?? "*"}:${port}: ${err.message}`);
  process.exit(1);
});

server.listen(port, hostname, () => {
  // where this server listens, for the command line on this machine (lib/process/start-server.ts,
  // which may finish starting before or after this)
  globalThis.__idemgateAddress = server.address();
  globalThis.__idemgateListening?.(globalThis.__idemgateAddress);
  const shown = hostname === undefined ? "localhost" : hostname.includes(":") ? `[${hostname}]` : hostname;
  console.log(`idemgate: serving on http://${shown}:${port}${hostname === undefined ? " (every interface; set HOST to choose one)" : ""}`);
});

// Stop accepting, let running calls finish, then exit; instrumentation closes the runtime (flushes
// the audit log, unlocks the embedded database) on the way out.
let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    server.close(() => process.exit(0));
    server.closeIdleConnections();
    setTimeout(() => process.exit(0), 10_000).unref();
  });
}
