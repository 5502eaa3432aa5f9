import type { IncomingMessage, ServerResponse } from "node:http";
import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import { knownPrincipal, tokenPrincipal } from "@/lib/auth/token-guard";
import type { HttpAnswer } from "@/lib/http/answer";
import { bodyConsumed, completeBody, drain, nodeHeaders, readAtMost, writeAnswer } from "@/lib/http/node-bridge";
import { problemAnswer } from "@/lib/http/problem";
import { checkJsonHeaders, MAX_BODY_BYTES, parseJsonBytes } from "@/lib/http/read-body";
import { getRuntime, type Runtime } from "@/lib/server/runtime";
import { GATEWAY_ROUTES, type GatewayHandler, type GatewayRoute } from "./routes";

/** A route's path as a pattern over a request target: its one parameter captured, any query allowed. */
function pathPattern(route: GatewayRoute): RegExp {
  const source = route.path
    .split(/\{\w+\}/)
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join("([^/?#]+)");
  return new RegExp(`^${source}(?:\\?[^#]*)?$`);
}

/**
 * The gateway's routes (routes.ts) this path serves: its POSTs, whose answers are short. A GET (the
 * held calls' listing) is left to Next.js, which compresses a long listing for a client that asks.
 */
const ROUTES: { path: RegExp; handler: GatewayHandler }[] = Object.values(GATEWAY_ROUTES)
  .filter((route: GatewayRoute) => route.method === "POST")
  .map((route: GatewayRoute) => ({ path: pathPattern(route), handler: route.handle }));

/** What is read of a refused body before answering, so the client reads the answer; beyond it the connection closes. */
const DRAIN_LIMITS = { maxBytes: 8 * 1024 * 1024, maxMs: 5_000 };

/**
 * The gateway's POST routes (routes.ts: /api/v1/tools/{tool}/invoke, the reservation API, the probe
 * API, the client replays) answered straight from node:http: the same token check and handler as
 * their App Router routes (app-route.ts), without the framework's routing and without building Fetch
 * requests and responses, which cost more than the call itself (docs/benchmarks.md). The server
 * (scripts/serve.mjs) offers every request here first; anything else, and a path segment that is not
 * valid percent-encoding, is left to Next.js. Returns whether it took the request.
 */
export function handleInvoke(req: IncomingMessage, res: ServerResponse): boolean {
  const matched = matchRoute(req.method ?? "", req.url ?? "");
  if (!matched) return false;
  void serve(req, res, matched.segment, matched.handler);
  return true;
}

/** The gateway route a request names, with its path parameter decoded; null when it names none (or one not validly percent-encoded). */
export function matchRoute(method: string, url: string): { handler: GatewayHandler; segment: string } | null {
  if (method !== "POST") return null;
  for (const route of ROUTES) {
    const match = route.path.exec(url);
    if (!match) continue;
    try {
      return { handler: route.handler, segment: match[1] === undefined ? "" : decodeURIComponent(match[1]) };
    } catch {
      return null;
    }
  }
  return null;
}

/** The runtime getRuntime()'s promise resolved to: while it hands out the same promise, calls use it without awaiting. */
let opened: { promise: Promise<Runtime>; runtime: Runtime } | undefined;

function runtimeNow(): Runtime | Promise<Runtime> {
  const promise = getRuntime();
  if (opened?.promise === promise) return opened.runtime;
  return promise.then((runtime) => {
    opened = { promise, runtime };
    return runtime;
  });
}

// Each await is a promise, and with Next.js's AsyncLocalStorage every promise also runs async hooks:
// a call whose token this process knows awaits its body and the engine only.
async function serve(req: IncomingMessage, res: ServerResponse, segment: string, handler: GatewayHandler): Promise<void> {
  let answer: HttpAnswer;
  try {
    const headers = nodeHeaders(req);
    const ready = runtimeNow();
    const runtime = ready instanceof Promise ? await ready : ready;
    const principal: TokenPrincipal = knownPrincipal(headers) ?? (await tokenPrincipal(headers, runtime));
    const json = () => {
      checkJsonHeaders(headers, MAX_BODY_BYTES);
      // whole when the token was looked up (node:http parsed the body meanwhile); else still to come
      const body = completeBody(req, MAX_BODY_BYTES);
      if (body !== undefined) return parseJsonBytes(body, MAX_BODY_BYTES);
      return readAtMost(req, MAX_BODY_BYTES + 1).then((bytes) => parseJsonBytes(bytes, MAX_BODY_BYTES));
    };
    const query = () => new URLSearchParams(/\?([^#]*)/.exec(req.url ?? "")?.[1] ?? "");
    answer = await handler({ headers, json, query }, segment, principal, runtime);
  } catch (err) {
    answer = problemAnswer(err, (req.url ?? "").split("?")[0]);
  }
  try {
    const ended = bodyConsumed(req) || (await drain(req, DRAIN_LIMITS));
    writeAnswer(res, answer, { close: !ended });
  } catch {
    // the client went away, or a header could not be written: nothing left to tell it
    res.destroy();
  }
}

const holder = globalThis as unknown as { __idemgateFastInvoke?: typeof handleInvoke };

/** Offers the fast path to the server process (scripts/serve.mjs looks for it on globalThis). */
export function registerFastInvoke(): void {
  holder.__idemgateFastInvoke = handleInvoke;
}
