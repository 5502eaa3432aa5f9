import { createHash } from "node:crypto";
import { z } from "zod";
import { readCapped } from "@/lib/http/read-body";
import {
  FinalToolError,
  NotRunError,
  OutcomeUnknown,
  type ProbeAnswer,
  type ProbeContext,
  type ProbeTool,
  type RunTool,
  type ToolContext,
  type ToolResult,
} from "@/lib/idempotency/tool";
import type { UpstreamConfig } from "./define-tool";

/**
 * 4xx answers are the service's final word and are stored, except these: they say "not now"
 * without applying anything, so the key is released and a retry runs.
 */
const NOT_NOW_STATUSES = new Set([408, 425, 429]);

/** The largest upstream answer body kept, unless a tool sets `maxResponseBytes`. */
export const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;

/** `Idemgate-Outcome: not-applied` on any answer: the service says it applied nothing. */
export const OUTCOME_HEADER = "idemgate-outcome";

/**
 * Connection errors raised before a byte of the request could be sent: nothing reached the
 * service. Anything else (a reset, a socket closed mid-answer) may have happened after it acted.
 */
const NOT_SENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "UND_ERR_CONNECT_TIMEOUT"]);

/**
 * The key a service receives: a hash of the caller's scope and key, so two tenants that use the
 * same key string never collide at a service that holds one credential for Idemgate. The same
 * (scope, key) always derives the same key, so a service that deduplicates recognises a resend.
 */
export function derivedKey(scope: string, key: string): string {
  const digest = createHash("sha256").update("idemgate/upstream-key/v1\0").update(scope).update("\0").update(key).digest("base64url");
  return `idg_${digest}`;
}

/**
 * A runner that forwards a call to an HTTP service: POST the arguments as JSON with the derived
 * idempotency key. The answer decides the outcome class (DESIGN.md, upstream contract):
 * - 2xx → the result; 4xx other than 408/425/429 → a final error, stored and replayed;
 * - 408/425/429, `Idemgate-Outcome: not-applied`, or a connection that failed before the request
 *   was sent → NotRunError: nothing happened, the key is released;
 * - a timeout, a reset after sending, 5xx, 3xx → OutcomeUnknown: the key is held.
 */
export function upstreamRunner(config: UpstreamConfig, fetchImpl: typeof fetch = fetch): RunTool {
  return async (args: unknown, ctx: ToolContext): Promise<ToolResult> => {
    const timeout = AbortSignal.timeout(config.timeoutMs);
    const signal = ctx.signal ? AbortSignal.any([timeout, ctx.signal]) : timeout;

    let response: Response;
    try {
      response = await fetchImpl(config.url, {
        method: "POST",
        headers: forwardedHeaders(config, ctx),
        body: JSON.stringify(args ?? {}),
        signal,
        // Following a redirect would send the side effect somewhere nobody configured.
        redirect: "manual",
      });
    } catch (err) {
      if (timeout.aborted) throw new OutcomeUnknown(`timed out after ${config.timeoutMs} ms`, true);
      const error = errorCode(err);
      if (notSent(error)) throw new NotRunError(`the service could not be reached (${error!.code}); the request was not sent`);
      throw new OutcomeUnknown(`the connection failed after the request was sent (${error?.code ?? describeError(err)})`);
    }

    if (response.headers.get(OUTCOME_HEADER)?.trim().toLowerCase() === "not-applied") {
      await response.body?.cancel().catch(() => {});
      throw new NotRunError(`the service answered ${response.status} and applied nothing`, response.status);
    }
    const status = response.status;
    if (NOT_NOW_STATUSES.has(status)) {
      await response.body?.cancel().catch(() => {});
      throw new NotRunError(`the service answered ${status} without applying the call`, status);
    }
    if (status < 200 || status >= 500 || (status >= 300 && status < 400)) {
      await response.body?.cancel().catch(() => {});
      throw new OutcomeUnknown(`the service answered ${status}`);
    }

    const limit = config.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    let text: string | null;
    try {
      text = await readAnswerCapped(response, limit);
    } catch (err) {
      if (timeout.aborted) throw new OutcomeUnknown(`timed out after ${config.timeoutMs} ms while reading the service's ${status} answer`, true);
      throw new OutcomeUnknown(`the service's ${status} answer was cut off (${errorCode(err)?.code ?? describeError(err)})`);
    }
    // Too large to keep. The status says the service applied the call (2xx) or refused it for good
    // (a final 4xx), so the outcome is known: holding the key as unknown would have an operator
    // decide what the service already said, and releasing it would run the side effect again. The
    // call is done, and its stored result (answered now and to every retry) says that it was
    // applied with that status and that its body was not kept.
    const body = text === null ? tooLarge(status, limit) : parseBody(text);
    if (status < 300) return { status, body };
    throw new FinalToolError(status, body);
  };
}

const StatusAnswer = z.discriminatedUnion("outcome", [
  z.object({ outcome: z.literal("applied"), status: z.number().int().min(200).max(499).default(200), body: z.unknown() }),
  z.object({ outcome: z.literal("not_applied") }),
  z.object({ outcome: z.literal("unknown") }),
]);

/**
 * The status probe of an upstream tool with a `statusUrl`: `GET statusUrl` with the headers the
 * call was sent with. Anything but a well-formed 2xx answer is "unknown": only the service's own
 * word resolves or releases a key.
 */
export function upstreamProber(config: UpstreamConfig & { statusUrl: string }, fetchImpl: typeof fetch = fetch): ProbeTool {
  return async (ctx: ProbeContext): Promise<ProbeAnswer> => {
    const timeout = AbortSignal.timeout(config.timeoutMs);
    const signal = ctx.signal ? AbortSignal.any([timeout, ctx.signal]) : timeout;
    const headers = forwardedHeaders(config, { scope: ctx.scope, key: ctx.key, session: null, executionId: ctx.executionId });
    headers.delete("content-type");
    let response: Response;
    let text: string | null;
    try {
      response = await fetchImpl(config.statusUrl, { method: "GET", headers, signal, redirect: "manual" });
      text = await readAnswerCapped(response, config.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES);
    } catch (err) {
      return { outcome: "unknown", note: timeout.aborted ? `the status probe timed out after ${config.timeoutMs} ms` : `the status probe failed (${errorCode(err)?.code ?? describeError(err)})` };
    }
    if (response.status < 200 || response.status >= 300) return { outcome: "unknown", note: `the status probe answered ${response.status}` };
    if (text === null) return { outcome: "unknown", note: "the status probe's answer is larger than the tool keeps" };
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return { outcome: "unknown", note: "the status probe's answer is not JSON" };
    }
    const answer = StatusAnswer.safeParse(parsed);
    if (!answer.success) return { outcome: "unknown", note: "the status probe's answer has no valid outcome" };
    return answer.data.outcome === "applied" ? { outcome: "applied", status: answer.data.status, body: answer.data.body ?? null } : answer.data;
  };
}

function forwardedHeaders(config: UpstreamConfig, ctx: ToolContext): Headers {
  // Configured headers first: they may not override what names the call.
  const headers = new Headers(config.headers);
  headers.set("content-type", "application/json");
  headers.set("accept", "application/json");
  headers.set("idemgate-scope", ctx.scope);
  if (ctx.key !== null) {
    headers.set("idempotency-key", derivedKey(ctx.scope, ctx.key));
    headers.set("idemgate-key", ctx.key);
  } else {
    headers.delete("idempotency-key");
    headers.delete("idemgate-key");
  }
  if (ctx.session !== null) headers.set("idemgate-session", ctx.session);
  else headers.delete("idemgate-session");
  if (ctx.executionId !== null) headers.set("idemgate-execution-id", ctx.executionId);
  else headers.delete("idemgate-execution-id");
  return headers;
}

/** The error code of a failed fetch (undici puts the socket's code on `cause`), and the system call that failed. */
function errorCode(err: unknown): { code: string; syscall: string | null } | null {
  for (let e: unknown = err, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, syscall } = e as { code?: unknown; syscall?: unknown };
    if (typeof code === "string") return { code, syscall: typeof syscall === "string" ? syscall : null };
  }
  return null;
}

/**
 * Whether the request certainly never left: the connection could not be made. An unreachable host
 * or network reported on a connection already open (a keep-alive probe failing mid-call) may come
 * after the request was sent, so those codes count only when connecting or resolving failed.
 */
function notSent(error: { code: string; syscall: string | null } | null): boolean {
  if (error === null || !NOT_SENT_CODES.has(error.code)) return false;
  if (error.code === "EHOSTUNREACH" || error.code === "ENETUNREACH") return error.syscall === "connect";
  return true;
}

function describeError(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
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

/**
 * The answer's body as text, or null when it is longer than `limit` bytes: a declared
 * Content-Length over the limit is not read at all, and a body without one is read until it
 * passes the limit, then cancelled. Memory stays within about the limit either way.
 */
async function readAnswerCapped(response: Response, limit: number): Promise<string | null> {
  const declared = Number(response.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > limit) {
    await response.body?.cancel().catch(() => {});
    return null;
  }
  if (!response.body) return "";
  return (await readCapped(response.body, limit))?.toString("utf8") ?? null;
}

/** The stored result of an answer too large to keep: what the service said, without its body. */
function tooLarge(status: number, limit: number): unknown {
  return {
    idemgate: {
      resultTooLarge: true,
      status,
      maxResponseBytes: limit,
      note: `the service answered ${status} with a body larger than ${limit} bytes, which is not kept; the call is done and is not sent again`,
    },
  };
}
