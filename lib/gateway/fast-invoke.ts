import type { IncomingMessage, ServerResponse } from "node:http";
import type { HttpAnswer } from "@/lib/http/answer";
import { drain, nodeHeaders, readAtMost, writeAnswer } from "@/lib/http/node-bridge";
import { problemAnswer } from "@/lib/http/problem";
import { checkJsonHeaders, MAX_BODY_BYTES, parseJsonBytes } from "@/lib/http/read-body";
import { tokenPrincipal } from "@/lib/auth/token-guard";
import { getRuntime } from "@/lib/server/runtime";
import { invokeTool } from "./invoke-tool";

const INVOKE_PATH = /^\/api\/v1\/tools\/([^/?#]+)\/invoke(?:\?[^#]*)?$/;

/** What is read of a refused body before answering, so the client reads the answer; beyond it the connection closes. */
const DRAIN_LIMITS = { maxBytes: 8 * 1024 * 1024, maxMs: 5_000 };

/**
 * POST /api/v1/tools/{tool}/invoke answered straight from node:http: the same token check and
 * handler (invokeTool) as the App Router route (app/api/v1/tools/[tool]/invoke/route.ts), without
 * the framework's routing and without building Fetch requests and responses, which cost more than
 * the call itself (docs/benchmarks.md). The server (scripts/serve.mjs) offers every request here
 * first; anything else, and a tool segment that is not valid percent-encoding, is left to Next.js.
 * Returns whether it took the request.
 */
export function handleInvoke(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method !== "POST") return false;
  const match = INVOKE_PATH.exec(req.url ?? "");
  if (!match) return false;
  let tool: string;
  try {
    tool = decodeURIComponent(match[1]);
  } catch {
    return false;
  }
  void serve(req, res, tool);
  return true;
}

async function serve(req: IncomingMessage, res: ServerResponse, tool: string): Promise<void> {
  let answer: HttpAnswer;
  try {
    const headers = nodeHeaders(req);
    const runtime = await getRuntime();
    const principal = await tokenPrincipal(headers, runtime);
    const json = async () => {
      checkJsonHeaders(headers, MAX_BODY_BYTES);
      return parseJsonBytes(await readAtMost(req, MAX_BODY_BYTES + 1), MAX_BODY_BYTES);
    };
    answer = await invokeTool({ headers, json }, tool, principal, runtime);
  } catch (err) {
    answer = problemAnswer(err, (req.url ?? "").split("?")[0]);
  }
  try {
    const ended = await drain(req, DRAIN_LIMITS);
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
