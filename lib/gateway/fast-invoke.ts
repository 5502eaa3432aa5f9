import type { IncomingMessage, ServerResponse } from "node:http";
import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import { knownPrincipal, tokenPrincipal } from "@/lib/auth/token-guard";
import type { HttpAnswer } from "@/lib/http/answer";
import { bodyConsumed, completeBody, drain, nodeHeaders, readAtMost, writeAnswer } from "@/lib/http/node-bridge";
import { problemAnswer } from "@/lib/http/problem";
import { checkJsonHeaders, MAX_BODY_BYTES, parseJsonBytes } from "@/lib/http/read-body";
import { getRuntime, type Runtime } from "@/lib/server/runtime";
import { invokeTool, type GatewayRequest } from "./invoke-tool";
import { recordClientReplays } from "./record-client-replays";
import { answerProbe, claimProbe } from "./probes";
import { reserveTool, settleExecution } from "./reservations";

type Handler = (request: GatewayRequest, segment: string, principal: TokenPrincipal, runtime: Runtime) => Promise<HttpAnswer>;

/** The gateway's routes this path answers: a path with at most one segment (a tool, an execution id), and its handler. */
const ROUTES: { path: RegExp; handler: Handler }[] = [
  { path: /^\/api\/v1\/tools\/([^/?#]+)\/invoke(?:\?[^#]*)?$/, handler: invokeTool },
  { path: /^\/api\/v1\/tools\/([^/?#]+)\/reservations(?:\?[^#]*)?$/, handler: reserveTool },
  { path: /^\/api\/v1\/executions\/([^/?#]+)\/complete(?:\?[^#]*)?$/, handler: (r, id, p, rt) => settleExecution(r, id, "complete", p, rt) },
  { path: /^\/api\/v1\/executions\/([^/?#]+)\/release(?:\?[^#]*)?$/, handler: (r, id, p, rt) => settleExecution(r, id, "release", p, rt) },
  { path: /^\/api\/v1\/executions\/([^/?#]+)\/heartbeat(?:\?[^#]*)?$/, handler: (r, id, p, rt) => settleExecution(r, id, "heartbeat", p, rt) },
  { path: /^\/api\/v1\/replays(?:\?[^#]*)?$/, handler: recordClientReplays },
  { path: /^\/api\/v1\/executions\/([^/?#]+)\/probe\/claim(?:\?[^#]*)?$/, handler: claimProbe },
  { path: /^\/api\/v1\/executions\/([^/?#]+)\/probe\/answer(?:\?[^#]*)?$/, handler: answerProbe },
];

/** What is read of a refused body before answering, so the client reads the answer; beyond it the connection closes. */
const DRAIN_LIMITS = { maxBytes: 8 * 1024 * 1024, maxMs: 5_000 };

/**
 * POST /api/v1/tools/{tool}/invoke (and the reservation API: POST /api/v1/tools/{tool}/reservations,
 * /api/v1/executions/{executionId}/complete | release | heartbeat | probe/claim | probe/answer, and POST /api/v1/replays) answered straight from node:http: the same token check and
 * handler (invokeTool) as the App Router route (app/api/v1/tools/[tool]/invoke/route.ts), without
 * the framework's routing and without building Fetch requests and responses, which cost more than
 * the call itself (docs/benchmarks.md). The server (scripts/serve.mjs) offers every request here
 * first; anything else, and a tool segment that is not valid percent-encoding, is left to Next.js.
 * Returns whether it took the request.
 */
export function handleInvoke(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method !== "POST") return false;
  const url = req.url ?? "";
  let match: RegExpExecArray | null = null;
  let handler: Handler | undefined;
  for (const route of ROUTES) {
    match = route.path.exec(url);
    if (match) {
      handler = route.handler;
      break;
    }
  }
  if (!match || !handler) return false;
  let segment: string;
  try {
    segment = match[1] === undefined ? "" : decodeURIComponent(match[1]);
  } catch {
    return false;
  }
  void serve(req, res, segment, handler);
  return true;
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
async function serve(req: IncomingMessage, res: ServerResponse, segment: string, handler: Handler): Promise<void> {
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
    answer = await handler({ headers, json }, segment, principal, runtime);
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
