import { CONFLICT_RETRY_AFTER_MS, IdemgateError, isIdemgateError, type SuppressionError } from "@/lib/idempotency/errors";
import { stateOf } from "@/lib/idempotency/record";
import { PAUSED_RETRY_AFTER_SECONDS } from "@/lib/idempotency/paused-tools";
import { isConnectionFailure } from "@/lib/db/errors";
import { toResponse, type HttpAnswer } from "./answer";

/** Errors of the HTTP layer itself, before the engine is asked. */
export class HttpError extends IdemgateError {
  constructor(
    readonly code: string,
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const unauthorized = (detail = "send an API token as `Authorization: Bearer <token>`") => new HttpError("unauthorized", 401, detail);
export const forbidden = (detail: string) => new HttpError("forbidden", 403, detail);
export const notFound = (detail: string) => new HttpError("not_found", 404, detail);
export const badRequest = (code: string, detail: string) => new HttpError(code, 400, detail);

/** A header the gateway sends with a problem type: its value, and what it tells the caller. */
export interface ProblemHeader {
  value: string;
  description: string;
}

export interface ProblemType {
  /** the status this type is answered with */
  status: number;
  title: string;
  /** other statuses the same type is answered with */
  otherStatuses?: readonly number[];
  /** headers sent with every answer of this type */
  headers?: Readonly<Record<string, ProblemHeader>>;
}

const RETRY_AFTER_SECONDS = Math.max(1, Math.ceil(CONFLICT_RETRY_AFTER_MS / 1000));

/** How long a 503 asks the caller to wait: a restarting database or store is back in seconds. */
const UNAVAILABLE_RETRY_AFTER_SECONDS = 2;

/**
 * One place maps every error code to its status, title and headers; the `type` is
 * `/problems/<code>`. The gateway's answers (problemAnswer), the problem pages and the OpenAPI
 * document's error responses (lib/tools/openapi.ts) are all read from this table.
 */
const PROBLEMS: Record<string, ProblemType> = {
  missing_key: { status: 400, title: "Idempotency-Key required" },
  invalid_key: { status: 400, title: "Invalid Idempotency-Key" },
  invalid_arguments: { status: 400, title: "Invalid arguments" },
  invalid_json: { status: 400, title: "Malformed JSON body" },
  invalid_header: { status: 400, title: "Invalid header" },
  invalid_request: { status: 400, title: "Invalid request" },
  invalid_cursor: { status: 400, title: "Invalid list cursor" },
  runs_in_client: { status: 400, title: "Tool runs in its caller's process" },
  unauthorized: {
    status: 401,
    title: "Authentication required",
    headers: { "WWW-Authenticate": { value: 'Bearer realm="idemgate"', description: "the scheme to authenticate with: an API token as a bearer token" } },
  },
  forbidden: { status: 403, title: "Not allowed" },
  unknown_tool: { status: 404, title: "Unknown tool" },
  not_found: { status: 404, title: "Not found" },
  conflict: {
    status: 409,
    title: "Request in progress",
    headers: {
      "Retry-After": {
        value: String(RETRY_AFTER_SECONDS),
        description: `always ${RETRY_AFTER_SECONDS} (seconds): send the same request with the same key again after this; it is not the rest of the running call's lease`,
      },
    },
  },
  stuck: { status: 409, title: "Key stuck: an operator must decide" },
  // 409 for a retry of a key whose outcome is unknown; 502 (504 after a timeout) for the call itself
  outcome_unknown: { status: 409, title: "Outcome unknown: the key is held", otherStatuses: [502, 504] },
  invalid_state: { status: 409, title: "Not allowed in this state" },
  stale_token: { status: 409, title: "Reservation no longer held" },
  name_taken: { status: 409, title: "Name already in use" },
  probe_claimed: { status: 409, title: "Probe claimed by another process" },
  not_held: { status: 409, title: "Call no longer held" },
  lease_running: { status: 409, title: "Call may still be running" },
  limit_reached: { status: 409, title: "Limit reached" },
  method_not_allowed: { status: 405, title: "Method not allowed" },
  request_timeout: { status: 408, title: "Request timeout" },
  payload_too_large: { status: 413, title: "Request body too large" },
  unsupported_media_type: { status: 415, title: "Unsupported media type" },
  mismatch: { status: 422, title: "Idempotency-Key reused with other arguments" },
  headers_too_large: { status: 431, title: "Request header fields too large" },
  abandoned: { status: 500, title: "Call abandoned" },
  internal: { status: 500, title: "Internal error" },
  tool_failed: { status: 502, title: "Tool failed" },
  server_busy: { status: 503, title: "Server busy" },
  unavailable: {
    status: 503,
    title: "Service unavailable",
    headers: {
      "Retry-After": {
        value: String(UNAVAILABLE_RETRY_AFTER_SECONDS),
        description: `always ${UNAVAILABLE_RETRY_AFTER_SECONDS} (seconds): the key store or the database could not be reached; send the same request with the same key again after this, with backoff`,
      },
    },
  },
  tool_paused: {
    status: 503,
    title: "Tool paused by an operator",
    headers: {
      "Retry-After": {
        value: String(PAUSED_RETRY_AFTER_SECONDS),
        description: `always ${PAUSED_RETRY_AFTER_SECONDS} (seconds): nothing ran and nothing was reserved; an operator paused the tool (\`reason\` says why) and resumes it when it is safe, so a client does not retry on its own`,
      },
    },
  },
};

export const PROBLEM_CODES = Object.keys(PROBLEMS);

/** The problem type of a code; own entries only ("constructor" or "__proto__" is no problem type). */
export function problemInfo(code: string): ProblemType | undefined {
  return Object.hasOwn(PROBLEMS, code) ? PROBLEMS[code] : undefined;
}

/** The headers the gateway sends with an answer of this type (values only). */
function problemHeaders(info: ProblemType): Record<string, string> {
  return Object.fromEntries(Object.entries(info.headers ?? {}).map(([name, h]) => [name, h.value]));
}

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

export function problemResponse(status: number, body: ProblemBody, headers: Record<string, string> = {}): Response {
  return toResponse(problemParts(status, body, headers));
}

function problemParts(status: number, body: ProblemBody, headers: Record<string, string> = {}): HttpAnswer {
  return { status, headers: { "Content-Type": "application/problem+json", "Cache-Control": "no-store", ...headers }, body: JSON.stringify(body) };
}

/**
 * The fields errorResponse reads. An error thrown by the engine or the registry may be an instance of
 * another bundle's copy of its class, so it is recognized by isIdemgateError and its code (one of
 * PROBLEMS), and read by the fields its class carries, never by `instanceof`.
 */
interface KnownError extends Error {
  code: string;
  status?: unknown;
  headers?: unknown;
  issues?: unknown;
  record?: unknown;
}

function knownError(err: unknown): KnownError | null {
  return isIdemgateError(err) && Object.hasOwn(PROBLEMS, err.code) ? err : null;
}

const SUPPRESSION_CODES = new Set(["conflict", "stuck", "mismatch", "outcome_unknown"]);

/** Turns any thrown value into an RFC 9457 response; unknown errors become a 500 without details. */
export function errorResponse(err: unknown, instance?: string): Response {
  return toResponse(problemAnswer(err, instance));
}

/** errorResponse's answer before it is a `Response`. */
export function problemAnswer(err: unknown, instance?: string): HttpAnswer {
  const known = knownError(err);
  if (!known && isConnectionFailure(err)) {
    // the database or the key store broke off (a restart, a failover): whatever path met it, the
    // caller is told to come back, never 500
    console.error(`idemgate: a database or key-store connection failed: ${err instanceof Error ? err.message.trim().split("\n").pop() : String(err)}`);
    const body: ProblemBody = { type: "/problems/unavailable", title: PROBLEMS.unavailable.title, status: 503, detail: "a service this request needs (the database, the key store) could not be reached; retry shortly with the same key" };
    if (instance) body.instance = instance;
    return problemParts(503, body, problemHeaders(PROBLEMS.unavailable));
  }
  if (!known) {
    console.error("unexpected error", err);
    return problemParts(500, { type: "/problems/internal", title: PROBLEMS.internal.title, status: 500, detail: "an unexpected error occurred; it has been logged", instance });
  }
  const info = PROBLEMS[known.code] ?? PROBLEMS.internal;
  // HttpError and OutcomeUnknownError choose their own status (and headers)
  const http = typeof known.status === "number" && typeof known.headers === "object" && known.headers !== null;
  const status = http ? (known.status as number) : info.status;
  const headers: Record<string, string> = { ...problemHeaders(info), ...(http ? (known.headers as Record<string, string>) : {}) };
  const body: ProblemBody = { type: `/problems/${known.code}`, title: info.title, status, detail: known.message };
  if (instance) body.instance = instance;
  if (known.code === "invalid_arguments" && Array.isArray(known.issues) && known.issues.length) body.errors = known.issues;
  if (SUPPRESSION_CODES.has(known.code) && known.record && typeof known.record === "object") {
    const r = known.record as SuppressionError["record"];
    body.key = r.key;
    body.tool = r.tool;
    body.state = stateOf(r, Date.now());
    body.startedAt = new Date(r.createdAtMs).toISOString();
    if (r.leaseUntilMs !== null) body.leaseUntil = new Date(r.leaseUntilMs).toISOString();
  }
  if (known.code === "tool_paused") {
    const pause = (known as { pause?: { tool: string; reason: string; pausedAtMs: number | null } }).pause;
    if (pause) {
      body.tool = pause.tool;
      body.reason = pause.reason;
      if (pause.pausedAtMs !== null) body.pausedAt = new Date(pause.pausedAtMs).toISOString();
    }
  }
  const executionId = (known as { executionId?: unknown }).executionId;
  if (typeof executionId === "string") {
    // which execution to ask an operator about; the details stay in the console
    body.executionId = executionId;
    if (known.code === "outcome_unknown") {
      body.key = (known as unknown as { key: string }).key;
      body.state = "unknown";
    }
  }
  return problemParts(status, body, headers);
}
