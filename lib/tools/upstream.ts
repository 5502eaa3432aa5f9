import { ToolFailedError, ToolTimeoutError } from "@/lib/idempotency/errors";
import { FinalToolError, type RunTool, type ToolContext, type ToolResult } from "@/lib/idempotency/tool";
import type { UpstreamConfig } from "./define-tool";

/**
 * 4xx answers are the upstream's final word and are stored, except these: they say "not now", so
 * storing one would replay a transient refusal for the whole TTL. They release the key like a 5xx.
 */
const TRANSIENT_CLIENT_ERRORS = new Set([408, 425, 429]);

const MESSAGE_SNIPPET_CHARS = 200;

/**
 * A runner that forwards a call to an HTTP service: POST the arguments as JSON, passing the
 * idempotency key on so the service can deduplicate too (a timed-out call may have run there).
 *
 * 2xx → the result (its status and body); 4xx → a final error, stored and replayed;
 * 5xx, redirects, network errors → ToolFailedError; no answer in time → ToolTimeoutError.
 * The last two release the key, so a retry runs again — with the same key upstream.
 */
export function upstreamRunner(config: UpstreamConfig, fetchImpl: typeof fetch = fetch): RunTool {
  return async (args: unknown, ctx: ToolContext): Promise<ToolResult> => {
    const timeout = AbortSignal.timeout(config.timeoutMs);
    const signal = ctx.signal ? AbortSignal.any([timeout, ctx.signal]) : timeout;

    let response: Response;
    let text: string;
    try {
      response = await fetchImpl(config.url, {
        method: "POST",
        headers: forwardedHeaders(config, ctx),
        body: JSON.stringify(args ?? {}),
        signal,
        // Following a redirect would send the side effect somewhere nobody configured.
        redirect: "manual",
      });
      text = await response.text();
    } catch (err) {
      if (timeout.aborted) throw new ToolTimeoutError(config.timeoutMs);
      const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : "";
      throw new ToolFailedError(`upstream ${describeUrl(config.url)} unreachable: ${err instanceof Error ? err.message : String(err)}${cause}`);
    }

    const body = parseBody(text);
    const status = response.status;
    if (status >= 200 && status < 300) return { status, body };
    if (status >= 400 && status < 500 && !TRANSIENT_CLIENT_ERRORS.has(status)) throw new FinalToolError(status, body);
    const snippet = text.length > MESSAGE_SNIPPET_CHARS ? `${text.slice(0, MESSAGE_SNIPPET_CHARS)}…` : text;
    throw new ToolFailedError(`upstream ${describeUrl(config.url)} answered ${status}${snippet ? `: ${snippet}` : ""}`, status);
  };
}

function forwardedHeaders(config: UpstreamConfig, ctx: ToolContext): Headers {
  // Configured headers first: they may not override what names the call.
  const headers = new Headers(config.headers);
  headers.set("content-type", "application/json");
  headers.set("accept", "application/json");
  headers.set("idemgate-scope", ctx.scope);
  if (ctx.key !== null) headers.set("idempotency-key", ctx.key);
  else headers.delete("idempotency-key");
  if (ctx.session !== null) headers.set("idemgate-session", ctx.session);
  else headers.delete("idemgate-session");
  if (ctx.executionId !== null) headers.set("idemgate-execution-id", ctx.executionId);
  return headers;
}

/** JSON when it parses, `{ text }` otherwise, null for an empty body. */
function parseBody(text: string): unknown {
  if (text === "") return null;
  try {
    return JSON.parse(text);
  } catch {
    return { text };
  }
}

/** The origin and path only: a query string may hold credentials, and this goes into error messages. */
function describeUrl(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}
