import type { IncomingMessage, ServerResponse } from "node:http";
import { toWebRequest, sendWebResponse } from "@/lib/http/node-bridge";
import { errorResponse } from "@/lib/http/problem";
import { MAX_BODY_BYTES } from "@/lib/http/read-body";
import { withApiToken } from "@/lib/http/token-guard";
import { invokeTool } from "./invoke-tool";

const INVOKE_PATH = /^\/api\/v1\/tools\/([^/?#]+)\/invoke(?:\?[^#]*)?$/;

const invoke = withApiToken<{ tool: string }>((request, { params, principal, runtime }) => invokeTool(request, params.tool, principal, runtime));

/**
 * POST /api/v1/tools/{tool}/invoke answered straight from node:http, with the same handler as the
 * App Router route (app/api/v1/tools/[tool]/invoke/route.ts) but without the framework's routing and
 * rendering in front of it, which cost more than the call itself (docs/benchmarks.md). The server
 * (scripts/serve.mjs) offers every request here first; anything else, and a tool segment that is not
 * valid percent-encoding, is left to Next.js. Returns whether it took the request.
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
  let truncated = false;
  try {
    const web = await toWebRequest(req, MAX_BODY_BYTES);
    truncated = web.truncated;
    const response = await invoke(web.request, { params: Promise.resolve({ tool }) });
    // the rest of an oversized body is not read: the connection closes once the answer is out
    await sendWebResponse(res, response, truncated);
  } catch (err) {
    // the client went away mid-body, or the answer could not be written: nothing left to tell it
    if (res.headersSent || req.destroyed) {
      res.destroy();
      return;
    }
    await sendWebResponse(res, errorResponse(err, req.url?.split("?")[0]), true).catch(() => res.destroy());
  }
}

const holder = globalThis as unknown as { __idemgateFastInvoke?: typeof handleInvoke };

/** Offers the fast path to the server process (scripts/serve.mjs looks for it on globalThis). */
export function registerFastInvoke(): void {
  holder.__idemgateFastInvoke = handleInvoke;
}
