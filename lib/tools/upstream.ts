import { createHash } from "node:crypto";
import { z } from "zod";
import { outboundFetch } from "@/lib/http/outbound-fetch";
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
import type { UpstreamConfig, UpstreamOutcome } from "./define-tool";
import { nodeSend, type UpstreamResponse, type UpstreamSend } from "./upstream-http";
import { buildUpstreamRequest, callHeaders, RequestArgumentsError, type UpstreamRequest } from "./upstream-request";

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
const NOT_SENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "ETIMEDOUT", "UND_ERR_CONNECT_TIMEOUT"]);

/**
 * The key a service receives: a hash of the caller's scope and key, so two tenants that use the
 * same key string never collide at a service that holds one credential for Idemgate. The same
 * (scope, key) always derives the same key, so a service that deduplicates recognises a resend.
 */
export function derivedKey(scope: string, key: string): string {
  const digest = createHash("sha256").update("idemgate/upstream-key/v1\0").update(scope).update("\0").update(key).digest("base64url");
  return `idg_${digest}`;
}

/** What a service's answer (or its absence) says about a call. */
export type UpstreamAnswer =
  | { class: "done"; status: number; body: unknown; replayed: boolean }
  | { class: "not_run"; note: string; status?: number }
  /** answer: the service's status and body, when it answered (a 5xx, a redirect) */
  | { class: "unknown"; note: string; timedOut: boolean; answer?: { status: number; body: string } };

/**
 * Sends one request and classes its answer (DESIGN.md, upstream contract):
 * - 2xx → done with its body; 4xx other than 408/425/429 → done, a final error;
 * - 408/425/429, `Idemgate-Outcome: not-applied`, or a connection that failed before the request
 *   was sent → not run: nothing happened;
 * - a timeout, a reset after sending, 5xx, 3xx → unknown.
 * A tool's `outcomes` change the class of the statuses they name (4xx and 5xx only, checked when
 * declared): no answer at all (a timeout, a reset) is always unknown.
 */
export async function sendUpstream(config: UpstreamConfig, request: UpstreamRequest, fetchImpl: typeof fetch | undefined, outer?: AbortSignal): Promise<UpstreamAnswer> {
  const limits = callSignal(config.timeoutMs, outer);
  try {
    return await sendWithin(config, request, fetchImpl === undefined ? nodeSend : fetchSend(fetchImpl), limits.timeout, limits.signal);
  } finally {
    limits.done();
  }
}

/**
 * The signal of one call: aborted after `timeoutMs` (then `timeout.aborted`) or when `outer` is.
 * One controller and one timer, cleared by `done()`: AbortSignal.timeout and AbortSignal.any cost
 * a call several times as much (a transferable signal each, a DOMException built on every timeout).
 */
function callSignal(timeoutMs: number, outer?: AbortSignal): { signal: AbortSignal; timeout: { aborted: boolean }; done: () => void } {
  const controller = new AbortController();
  const timeout = { aborted: false };
  const timer = setTimeout(() => {
    timeout.aborted = true;
    controller.abort(new DOMException(`no answer within ${timeoutMs} ms`, "TimeoutError"));
  }, timeoutMs);
  const onOuter = () => controller.abort(outer!.reason);
  if (outer?.aborted) onOuter();
  else outer?.addEventListener("abort", onOuter, { once: true });
  return {
    signal: controller.signal,
    timeout,
    done: () => {
      clearTimeout(timer);
      outer?.removeEventListener("abort", onOuter);
    },
  };
}

/** A fetch (a test's, or one a deployment hands the registry) as an UpstreamSend. */
function fetchSend(fetchImpl: typeof fetch): UpstreamSend {
  return async (request, signal) => {
    const response = await fetchImpl(request.url, {
      method: request.method,
      headers: request.headers,
      body: request.body,
      signal,
      // Following a redirect would send the side effect somewhere nobody configured.
      redirect: "manual",
    });
    return {
      status: response.status,
      header: (name) => response.headers.get(name),
      text: (limit) => readAnswerCapped(response, limit),
      discard: () => void response.body?.cancel().catch(() => {}),
    };
  };
}

async function sendWithin(config: UpstreamConfig, request: UpstreamRequest, send: UpstreamSend, timeout: { aborted: boolean }, signal: AbortSignal): Promise<UpstreamAnswer> {
  const unknown = (note: string, timedOut = false): UpstreamAnswer => ({ class: "unknown", note, timedOut });

  let response: UpstreamResponse;
  try {
    response = await send(request, signal);
  } catch (err) {
    if (timeout.aborted) return unknown(`timed out after ${config.timeoutMs} ms`, true);
    const code = notSentCode(err);
    if (code !== null) return { class: "not_run", note: `the service could not be reached (${code}); the request was not sent` };
    return unknown(`the connection failed after the request was sent (${errorCode(err)?.code ?? describeError(err)})`);
  }

  const status = response.status;
  const limit = config.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  let text: string | null | undefined;
  const read = async (): Promise<UpstreamAnswer | null> => {
    try {
      text = await response.text(limit);
      return null;
    } catch (err) {
      if (timeout.aborted) return unknown(`timed out after ${config.timeoutMs} ms while reading the service's ${status} answer`, true);
      if (signal.aborted) return unknown(`the call was given up while the service's ${status} answer was being read`);
      return unknown(`the service's ${status} answer was cut off (${errorCode(err)?.code ?? describeError(err)})`);
    }
  };

  let cls: UpstreamOutcome;
  const override = config.outcomes?.[String(status)];
  const saysNotApplied = response.header(OUTCOME_HEADER)?.trim().toLowerCase() === "not-applied";
  if (saysNotApplied) {
    cls = "not_run";
  } else if (override !== undefined && (typeof override === "string" || override.when === undefined)) {
    cls = typeof override === "string" ? override : override.outcome;
  } else if (override !== undefined) {
    const failed = await read();
    if (failed) return failed;
    cls = text !== null && matches(parseBody(text!), override.when!) ? override.outcome : defaultClass(status);
  } else {
    cls = defaultClass(status);
  }
  // a result is 200 to 499 (checked when declared; a 5xx is never stored as one), and a 5xx frees
  // the key only when its body is the service's own (a matched `when`) and no gateway's (502, 504)
  if (cls === "done" && status >= 500) cls = "unknown";
  if (cls === "not_run" && !saysNotApplied && status >= 500 && (status === 502 || status === 504 || typeof override === "string" || override?.when === undefined)) cls = "unknown";

  if (cls === "unknown") {
    // the answer's body is kept with the execution (capped): what an operator resolving the key starts from
    if (text === undefined) await read();
    const note = `the service answered ${status}`;
    return { class: "unknown", note, timedOut: false, ...(typeof text === "string" && text !== "" ? { answer: { status, body: text } } : {}) };
  }
  if (cls !== "done") {
    if (text === undefined) response.discard();
    if (cls === "not_run") {
      if (saysNotApplied) return { class: "not_run", note: `the service answered ${status} and applied nothing`, status };
      const said = NOT_NOW_STATUSES.has(status) ? "" : " (the tool's outcomes say so of this answer)";
      return { class: "not_run", note: `the service answered ${status} without applying the call${said}`, status };
    }
  }
  if (text === undefined) {
    const failed = await read();
    if (failed) return failed;
  }
  // Too large to keep. The status says the service applied the call (2xx) or refused it for good
  // (a final 4xx), so the outcome is known: holding the key as unknown would have an operator
  // decide what the service already said, and releasing it would run the side effect again. The
  // call is done, and its stored result (answered now and to every retry) says that it was
  // applied with that status and that its body was not kept.
  return { class: "done", status, body: text === null ? tooLarge(status, limit) : parseBody(text!), replayed: saysReplayed(response.header(REPLAYED_HEADER)) };
}

/** `Idempotent-Replayed: true` (Stripe's): the answer is the one the service stored for the key's first request. */
export const REPLAYED_HEADER = "idempotent-replayed";

function saysReplayed(value: string | null): boolean {
  return value?.trim().toLowerCase() === "true";
}

function defaultClass(status: number): UpstreamOutcome {
  if (NOT_NOW_STATUSES.has(status)) return "not_run";
  if (status < 200 || status >= 500 || (status >= 300 && status < 400)) return "unknown";
  return "done";
}

/** Whether a JSON body holds every value of `when` (dotted paths: `error.type`). */
function matches(body: unknown, when: Record<string, string | number | boolean>): boolean {
  return Object.entries(when).every(([path, expected]) => {
    let at: unknown = body;
    for (const part of path.split(".")) at = at !== null && typeof at === "object" ? (at as Record<string, unknown>)[part] : undefined;
    return at === expected || (typeof at !== "object" && at !== undefined && String(at) === String(expected));
  });
}

/**
 * Where a `probe: resend` tool keeps each call's arguments from before it is sent until its outcome
 * is known (lib/tools/resend-log.ts): only a call whose outcome stayed unknown keeps them, for its
 * probe to send again.
 */
export interface ResendLog {
  keep(entry: { executionId: string; scope: string; key: string; tool: string; args: unknown; sentAtMs: number }): Promise<void>;
  /** every kept call of this key: its outcome is known now */
  forget(scope: string, key: string): Promise<void>;
  /**
   * the call asked about (by its execution, else the key's latest of this tool), with the time the
   * key was first sent (the earliest of its calls): the service's retention runs from then
   */
  find(scope: string, key: string, tool: string, executionId: string | null): Promise<{ args: unknown; sentAtMs: number } | null>;
}

/**
 * A runner that forwards a call to an HTTP service in the shape the tool declares
 * (lib/tools/upstream-request.ts) with the derived idempotency key; the answer's class
 * (sendUpstream) decides: done → the result or a stored final error; not run → NotRunError, the
 * key is released; unknown → OutcomeUnknown, the key is held.
 */
export function upstreamRunner(config: UpstreamConfig, fetchImpl?: typeof fetch, resendLog?: ResendLog, toolName = ""): RunTool {
  return async (args: unknown, ctx: ToolContext): Promise<ToolResult> => {
    let request: UpstreamRequest;
    try {
      request = buildUpstreamRequest(config, args, ctx, ctx.key === null ? null : derivedKey(ctx.scope, ctx.key));
    } catch (err) {
      if (err instanceof RequestArgumentsError) throw new NotRunError(`the request could not be built (${err.message}); nothing was sent`);
      throw err;
    }
    const keeps = config.probe === "resend" && resendLog !== undefined && ctx.key !== null && ctx.executionId !== null;
    // A retry of a key whose first send may have been forgotten by the service (its retention, less
    // the margin, has passed) could apply the call again: it is not sent, and the key stays unknown.
    if (keeps && config.keyRetentionMs !== undefined) {
      const first = await resendLog.find(ctx.scope, ctx.key!, toolName, null).catch(() => null);
      if (first && Date.now() >= first.sentAtMs + config.keyRetentionMs - resendMarginMs(config.keyRetentionMs)) {
        throw new OutcomeUnknown(`not sent again: the key was first sent more than the service keeps keys (${config.keyRetentionMs} ms) ago, less a margin, so it may have forgotten it and apply the call twice`, false);
      }
    }
    // Kept before sending: the call may be lost with this process once it is sent. A failure to
    // keep it only leaves its probe unable to resend (it then cannot tell), so the call goes on.
    if (keeps) await resendLog.keep({ executionId: ctx.executionId!, scope: ctx.scope, key: ctx.key!, tool: toolName, args: args ?? {}, sentAtMs: Date.now() }).catch(() => {});
    const answer = await sendUpstream(config, request, fetchImpl, ctx.signal);
    if (keeps && answer.class !== "unknown") await resendLog.forget(ctx.scope, ctx.key!).catch(() => {});
    if (answer.class === "unknown") throw new OutcomeUnknown(answer.note, answer.timedOut, undefined, answer.answer);
    if (answer.class === "not_run") throw new NotRunError(answer.note, answer.status);
    if (answer.status < 300) return { status: answer.status, body: answer.body };
    throw new FinalToolError(answer.status, answer.body);
  };
}

/** A resend is sent only this long before the service forgets the key: past it, it could run again. */
export function resendMarginMs(keyRetentionMs: number): number {
  return Math.min(60 * 60 * 1000, Math.floor(keyRetentionMs / 10));
}

/**
 * The probe of a tool with `probe: resend` (a service that deduplicates on the key): the call asked
 * about is sent again, the same request with the same derived key. The service answers with what
 * it stored for the key (or applies the call now, once, if the first never reached it): a 2xx, or
 * a 4xx marked as the key's stored answer (`Idempotent-Replayed: true`), resolves the key with it.
 * Any other answer (a 4xx not so marked: about the resend, not the first) (a conflict because the first is still in
 * progress, a refusal, no answer) cannot tell: a resend that did nothing says nothing about the
 * first. Nothing is resent once the service may have forgotten the key.
 */
export function upstreamResendProber(
  config: UpstreamConfig & { keyRetentionMs: number },
  resendLog: ResendLog,
  fetchImpl?: typeof fetch,
  now: () => number = Date.now,
  toolName = "",
): ProbeTool {
  return async (ctx: ProbeContext): Promise<ProbeAnswer> => {
    const kept = await resendLog.find(ctx.scope, ctx.key, toolName, ctx.executionId).catch(() => null);
    if (!kept) return { outcome: "unknown", note: "the call's arguments were not kept, so it cannot be sent again" };
    const until = kept.sentAtMs + config.keyRetentionMs - resendMarginMs(config.keyRetentionMs);
    if (now() >= until) return { outcome: "unknown", note: `the key was first sent more than the service keeps keys (${config.keyRetentionMs} ms) ago, less a margin; a resend could apply it again` };
    let request: UpstreamRequest;
    try {
      request = buildUpstreamRequest(config, kept.args, { scope: ctx.scope, key: ctx.key, session: null, executionId: ctx.executionId }, derivedKey(ctx.scope, ctx.key));
    } catch (err) {
      return { outcome: "unknown", note: `the call could not be built again (${describeError(err)})` };
    }
    const answer = await sendUpstream(config, request, fetchImpl, ctx.signal);
    // A 4xx to the resend is about the resend (a declaration changed since the first was sent, a
    // rotated credential, an edited URL), not about the first, which may have been applied: only a
    // 2xx, or a 4xx the service marks as its stored answer for the key, resolves it.
    if (answer.class === "done" && answer.status >= 300 && !answer.replayed) {
      return { outcome: "unknown", note: `resent with the same key: the service answered ${answer.status}, which says nothing about the first request (it is not marked as the key's stored answer)` };
    }
    if (answer.class === "done") {
      // the key is resolved with this answer: its arguments are needed no longer
      await resendLog.forget(ctx.scope, ctx.key).catch(() => {});
      return { outcome: "applied", status: answer.status, body: answer.body };
    }
    return { outcome: "unknown", note: `resent with the same key: ${answer.note}` };
  };
}

const StatusAnswer = z.discriminatedUnion("outcome", [
  z.object({ outcome: z.literal("applied"), status: z.number().int().min(200).max(499).default(200), body: z.unknown() }),
  z.object({ outcome: z.literal("not_applied") }),
  z.object({ outcome: z.literal("unknown"), note: z.string().max(1_000).optional(), candidate: z.object({ status: z.number().int().min(200).max(499).default(200), body: z.unknown() }).optional() }),
]);

/**
 * The status probe of an upstream tool with a `statusUrl`: `GET statusUrl` with the headers the
 * call was sent with. Anything but a well-formed 2xx answer is "unknown": only the service's own
 * word resolves or releases a key.
 */
export function upstreamProber(config: UpstreamConfig & { statusUrl: string }, fetchImpl: typeof fetch = outboundFetch): ProbeTool {
  return async (ctx: ProbeContext): Promise<ProbeAnswer> => {
    const { signal, timeout, done } = callSignal(config.timeoutMs, ctx.signal);
    const headers = callHeaders(config, { scope: ctx.scope, key: ctx.key, session: null, executionId: ctx.executionId }, derivedKey(ctx.scope, ctx.key));
    let response: Response;
    let text: string | null;
    try {
      response = await fetchImpl(config.statusUrl, { method: "GET", headers, signal, redirect: "manual" });
      text = await readAnswerCapped(response, config.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES);
    } catch (err) {
      return { outcome: "unknown", note: timeout.aborted ? `the status probe timed out after ${config.timeoutMs} ms` : `the status probe failed (${errorCode(err)?.code ?? describeError(err)})` };
    } finally {
      done();
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
    if (answer.data.outcome === "applied") return { outcome: "applied", status: answer.data.status, body: answer.data.body ?? null };
    if (answer.data.outcome === "unknown" && answer.data.candidate) return { ...answer.data, candidate: { status: answer.data.candidate.status, body: answer.data.candidate.body ?? null } };
    return answer.data;
  };
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
 * The error code of a failed fetch when the request certainly never left (the connection could not
 * be made), else null. Guarded MCP servers over HTTP use the same rule. An unreachable host
 * or network reported on a connection already open (a keep-alive probe failing mid-call) may come
 * after the request was sent, so those codes count only when connecting or resolving failed.
 */
export function notSentCode(err: unknown): string | null {
  const error = errorCode(err);
  if (error === null || !NOT_SENT_CODES.has(error.code)) return null;
  if ((error.code === "EHOSTUNREACH" || error.code === "ENETUNREACH" || error.code === "ETIMEDOUT") && error.syscall !== "connect") return null;
  return error.code;
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
