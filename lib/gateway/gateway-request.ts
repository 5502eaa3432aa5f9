import type { z } from "zod";
import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import { MAX_WAIT_MS, type InvokeRequest, type KeySource } from "@/lib/idempotency/engine";
import type { HeaderSource, HttpAnswer } from "@/lib/http/answer";
import { badRequest, problemAnswer } from "@/lib/http/problem";
import { readJsonBody } from "@/lib/http/read-body";

// A gateway request as its handlers (routes.ts) read it, and the one place the gateway's request
// headers are parsed: Idempotency-Key, Idemgate-Session, Idemgate-Key-Source and Prefer. The HTTP
// routes, the reservation API and MCP's tools/call read them through here.

/** A gateway call as the handler needs it: headers, query and the JSON body, each read only when asked for. */
export interface GatewayRequest {
  headers: HeaderSource;
  /** the parsed body, or a promise of it (the fast path parses a body it already holds at once) */
  json(): unknown;
  /** the query string's parameters */
  query(): URLSearchParams;
}

/** A Fetch request (the App Router's) as a gateway request. */
export function gatewayRequest(request: Request): GatewayRequest {
  return { headers: request.headers, json: () => readJsonBody(request), query: () => new URL(request.url).searchParams };
}

/** A JSON body checked against its schema; a body that does not match is a 400 `invalid_request` naming each issue. */
export function parsedBody<S extends z.ZodType>(schema: S, raw: unknown, what: string): z.output<S> {
  const out = schema.safeParse(raw ?? {});
  if (out.success) return out.data;
  const summary = out.error.issues.map((i) => `${i.path.length ? i.path.join(".") : "(body)"}: ${i.message}`).join("; ");
  throw badRequest("invalid_request", `invalid ${what} body: ${summary}`);
}

const SESSION_PATTERN = /^[\x21-\x7e]{1,200}$/;

/**
 * The Idempotency-Key header. The IETF draft makes it a Structured Field string ("…"); Stripe and
 * most clients send the bare value. Both are accepted; the quotes are not part of the key.
 *
 * It must be sent once. Sent twice, a Fetch `Headers` (the App Router, MCP) joins the values into
 * one, "order-42, order-42", which would otherwise be a new key and run the action again: a
 * repeated header is refused (counted where node:http's raw headers are at hand), and where only
 * the joined value is known, so is a bare value holding a ",". A key holding a "," is sent quoted.
 */
export function idempotencyKeyHeader(headers: HeaderSource): string | null {
  const raw = headers.get("idempotency-key");
  if (raw === null) return null;
  const sentTimes = headers.count?.("idempotency-key");
  if (sentTimes !== undefined && sentTimes > 1) throw badRequest("invalid_header", `Idempotency-Key was sent ${sentTimes} times: send it once`);
  const quoted = /^"((?:[^"\\]|\\[\\"])*)"$/.exec(raw);
  if (quoted) return quoted[1].replace(/\\([\\"])/g, "$1");
  if (sentTimes === undefined && raw.includes(",")) {
    throw badRequest("invalid_header", 'Idempotency-Key holds a "," outside quotes, as it does when sent more than once: send it once; a key holding a "," goes as a quoted string, "…"');
  }
  return raw;
}

/** The Idempotency-Key header's value for a key: bare, or a quoted string when the key holds a ",". */
export function idempotencyKeyValue(key: string): string {
  return key.includes(",") ? `"${key.replace(/[\\"]/g, "\\$&")}"` : key;
}

export function sessionHeader(headers: HeaderSource): string | null {
  const raw = headers.get("idemgate-session");
  if (raw === null) return null;
  if (!SESSION_PATTERN.test(raw)) throw badRequest("invalid_header", "Idemgate-Session must be 1–200 visible ASCII characters");
  return raw;
}

/**
 * `Idemgate-Key-Source: model` marks the key as minted by a model (advisory); `orchestrator` (the
 * default) as authoritative. Without the header, a token created with advisory keys makes it model.
 */
export function keySourceHeader(headers: HeaderSource, principal: TokenPrincipal): KeySource {
  const raw = headers.get("idemgate-key-source");
  if (raw === null) return principal.advisoryKeys ? "model" : "orchestrator";
  const value = raw.trim().toLowerCase();
  if (value === "model" || value === "orchestrator") return value;
  throw badRequest("invalid_header", "Idemgate-Key-Source must be `model` (the key was minted by a model: advisory) or `orchestrator`");
}

/**
 * `Prefer: wait=N` (RFC 7240): how long a duplicate of a running call may be held for its result,
 * at most 60 s; null when the header asks for no wait. Other preferences are ignored.
 */
export function preferredWaitSeconds(headers: HeaderSource): number | null {
  const seconds = waitPreference(headers);
  return seconds === null || seconds === 0 ? null : seconds;
}

/** The seconds `Prefer: wait=N` names, at most 60 s, 0 included (answer at once); null without one. */
export function waitPreference(headers: HeaderSource): number | null {
  const raw = headers.get("prefer");
  if (raw === null) return null;
  for (const part of raw.split(",")) {
    const match = /^\s*wait\s*=\s*"?(\d{1,9})"?\s*(?:;.*)?$/i.exec(part);
    if (match) {
      return Math.min(Number(match[1]), MAX_WAIT_MS / 1000);
    }
  }
  return null;
}

/** What a call's headers say: its key, its session, who minted the key, and how long a duplicate may wait for a running call. */
export interface CallHeaders {
  key: string | null;
  session: string | null;
  keySource: KeySource;
  /** `Prefer: wait=N`, when the call may wait (a write) and asked to */
  waitSeconds: number | null;
}

/** Reads a call's headers, in the order their errors are answered: key, session, key source, then Prefer. */
export function callHeaders(headers: HeaderSource, principal: TokenPrincipal, mayWait: boolean): CallHeaders {
  const key = idempotencyKeyHeader(headers);
  const session = sessionHeader(headers);
  const keySource = keySourceHeader(headers, principal);
  return { key, session, keySource, waitSeconds: mayWait ? preferredWaitSeconds(headers) : null };
}

/** The engine's request for a call of the token's scope with these headers and arguments. */
export function callRequest(call: CallHeaders, principal: TokenPrincipal, args: unknown): InvokeRequest {
  return {
    scope: principal.scope,
    key: call.key,
    args,
    session: call.session,
    caller: principal.tokenId,
    keySource: call.keySource,
    waitMs: call.waitSeconds === null ? undefined : call.waitSeconds * 1000,
  };
}

/**
 * The answer of a call that asked to wait, with `Preference-Applied: wait=N`: the preference was
 * honoured whatever the answer, so results and problems alike say so.
 */
export async function waitApplied(waitSeconds: number, instance: string, answer: () => Promise<HttpAnswer>): Promise<HttpAnswer> {
  let out: HttpAnswer;
  try {
    out = await answer();
  } catch (err) {
    out = problemAnswer(err, instance);
  }
  return { ...out, headers: { ...out.headers, "Preference-Applied": `wait=${waitSeconds}` } };
}
