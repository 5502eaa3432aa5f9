// Every problem type the gateway answers with (`/problems/<code>`, RFC 9457), in one table: its
// status, title, headers, whether a caller may send the same request again, and what the problem
// pages tell a caller. The gateway's answers (lib/http/problem.ts), the problem pages and the API
// reference (lib/docs), the OpenAPI document (lib/tools/openapi.ts), MCP tool errors
// (lib/mcp/call-tool.ts) and the clients' generated tables (scripts/gen-client-problems.ts) all read
// it. An error's `code` is a ProblemCode, so a code without an entry here does not compile.

/** Every problem code. Adding one: add its entry to PROBLEMS, then run `npx tsx scripts/gen-client-problems.ts`. */
export type ProblemCode =
  | "missing_key"
  | "invalid_key"
  | "invalid_arguments"
  | "invalid_json"
  | "invalid_header"
  | "invalid_request"
  | "invalid_cursor"
  | "runs_in_client"
  | "unauthorized"
  | "forbidden"
  | "unknown_tool"
  | "not_found"
  | "conflict"
  | "stuck"
  | "outcome_unknown"
  | "invalid_state"
  | "stale_token"
  | "name_taken"
  | "probe_claimed"
  | "not_held"
  | "lease_running"
  | "limit_reached"
  | "method_not_allowed"
  | "request_timeout"
  | "payload_too_large"
  | "unsupported_media_type"
  | "mismatch"
  | "headers_too_large"
  | "abandoned"
  | "internal"
  | "tool_failed"
  | "server_busy"
  | "unavailable"
  | "tool_paused";

/** Whether the same request may simply be sent again: what the problem pages say, and what the clients do. */
export type RetryRule = "yes" | "after Retry-After" | "no" | "with changes";

/** A header the gateway sends with a problem type: its value, and what it tells the caller. */
export interface ProblemHeader {
  value: string;
  description: string;
}

export interface ProblemEntry {
  /** the status this type is answered with */
  status: number;
  title: string;
  /** other statuses the same type is answered with */
  otherStatuses?: readonly number[];
  /** headers sent with every answer of this type */
  headers?: Readonly<Record<string, ProblemHeader>>;
  retry: RetryRule;
  /** for the problem page: what happened */
  happened: string;
  /** for the problem page: what to do */
  todo: string;
}

/**
 * What a 409 for a running call asks the caller to wait (Retry-After, in whole seconds): most calls
 * finish in well under a lease, so a short wait, not the lease's remainder.
 */
export const CONFLICT_RETRY_AFTER_MS = 1_000;
const CONFLICT_RETRY_AFTER_SECONDS = Math.max(1, Math.ceil(CONFLICT_RETRY_AFTER_MS / 1000));

/** How long a 503 asks the caller to wait: a restarting database or store is back in seconds. */
/** How long a caller of a paused tool is asked to wait before trying again (Retry-After, seconds). */
export const PAUSED_RETRY_AFTER_SECONDS = 30;

const UNAVAILABLE_RETRY_AFTER_SECONDS = 2;

const ENTRIES = {
  missing_key: {
    status: 400,
    title: "Idempotency-Key required",
    retry: "with changes",
    happened: "A write tool was called without an Idempotency-Key header, and the tool did not opt into fallback dedupe. Nothing ran.",
    todo: "Mint one key per logical action (a UUID is fine), send it as Idempotency-Key, and send the same key on every retry of that action.",
  },
  invalid_key: {
    status: 400,
    title: "Invalid Idempotency-Key",
    retry: "with changes",
    happened: "The Idempotency-Key is empty, longer than 255 characters, holds characters other than printable ASCII, or starts with the reserved prefix \"fallback:\". Nothing ran.",
    todo: "Send 1–255 printable ASCII characters. Keys are compared byte for byte and never normalized.",
  },
  invalid_arguments: {
    status: 400,
    title: "Invalid arguments",
    retry: "with changes",
    happened: "The JSON body does not match the tool's argument schema. The `errors` member lists each problem with its path. No key was reserved.",
    todo: "Fix the arguments (see the API reference for the schema) and send the call again; the same key may be used, since nothing was reserved.",
  },
  invalid_json: {
    status: 400,
    title: "Malformed JSON body",
    retry: "with changes",
    happened: "The body is not valid UTF-8 JSON. Nothing ran.",
    todo: "Send the arguments as a JSON object with Content-Type: application/json.",
  },
  invalid_header: {
    status: 400,
    title: "Invalid header",
    retry: "with changes",
    happened: "A header Idemgate reads (such as Idemgate-Session) has an invalid value, or Idempotency-Key was sent more than once. Nothing ran.",
    todo: "Idemgate-Session takes 1–200 visible ASCII characters. Send Idempotency-Key once; a key holding a \",\" goes as a quoted string (\"a,b\"). Correct the header and send again.",
  },
  invalid_request: {
    status: 400,
    title: "Invalid request",
    retry: "with changes",
    happened: "The request is malformed in a way the other types do not cover, e.g. an invalid query parameter or scope.",
    todo: "Read `detail` and `errors`, correct the request and send it again.",
  },
  invalid_cursor: {
    status: 400,
    title: "Invalid list cursor",
    retry: "with changes",
    happened:
      "The `cursor` of a list request is not one this server handed out for this listing: it was changed, it comes from a listing with other filters (scope, tool, state, prefix), or the server's secret (IDEMGATE_SECRET) changed since. Cursors are sealed and opaque; nothing was read.",
    todo: "Pass back a `nextCursor` unchanged, with the same filters it came with; otherwise start again from the first page (no cursor).",
  },
  runs_in_client: {
    status: 400,
    title: "Tool runs in its caller's process",
    retry: "with changes",
    happened: "The tool is declared with `runs: client`: it runs in its caller's own process, so Idemgate cannot invoke it through /invoke or MCP. Nothing was reserved.",
    todo: "Guard the function where it runs: reserve with POST /api/v1/tools/{tool}/reservations, run it after a 201, then complete or release the execution. The client libraries' guard() does this for you.",
  },
  unauthorized: {
    status: 401,
    title: "Authentication required",
    headers: { "WWW-Authenticate": { value: 'Bearer realm="idemgate"', description: "the scheme to authenticate with: an API token as a bearer token" } },
    retry: "with changes",
    happened: "No API token was sent, or the token is unknown or revoked (for console routes: no signed-in session).",
    todo: "Send `Authorization: Bearer <token>`. Create a token with `npx idemgate token create --scope NAME`.",
  },
  forbidden: {
    status: 403,
    title: "Not allowed",
    retry: "no",
    happened:
      "The caller is known but may not do this: an API token asked for another scope or an operator-only action, a viewer tried to change something, or a console request came from another origin.",
    todo: "Use a token or an operator account with the needed permission. Retrying unchanged will not help.",
  },
  unknown_tool: {
    status: 404,
    title: "Unknown tool",
    retry: "no",
    happened: "No tool by this name is configured.",
    todo: "Check the name against GET /api/v1/tools or the API reference; tool names are case-sensitive.",
  },
  not_found: {
    status: 404,
    title: "Not found",
    retry: "no",
    happened: "The resource (for example a key under /api/v1/keys/{scope}/{key}) does not exist, or is not visible to this caller.",
    todo: "Check the path; remember that each path segment must be URL-encoded.",
  },
  conflict: {
    status: 409,
    title: "Request in progress",
    headers: {
      "Retry-After": {
        value: String(CONFLICT_RETRY_AFTER_SECONDS),
        description: `always ${CONFLICT_RETRY_AFTER_SECONDS} (seconds): send the same request with the same key again after this; it is not the rest of the running call's lease`,
      },
    },
    retry: "after Retry-After",
    happened: "Another call with the same key is running right now (the key is inflight and its lease is valid). This call was suppressed so the side effect cannot run twice.",
    todo: "Wait the Retry-After seconds and send the same request with the same key: you get the first call's result once it finishes. Do not mint a new key, that would run the action again.",
  },
  stuck: {
    status: 409,
    title: "Key stuck: an operator must decide",
    retry: "no",
    happened:
      "A call with this key started but never finished within its lease: the process holding it probably crashed. The side effect may or may not have happened, so Idemgate will not guess.",
    todo: "An operator decides in the console: release the key (the side effect did not happen; the next retry runs it) or resolve it with the result (it did happen). Retrying before that gets this answer again.",
  },
  outcome_unknown: {
    status: 409,
    title: "Outcome unknown: the key is held",
    otherStatuses: [502, 504],
    retry: "no",
    happened:
      "The call ended without knowing whether its side effect happened: the tool timed out (504), its service answered 5xx or a redirect, the connection broke after the request was sent, or the tool threw after it started (502). A retry of such a key gets 409 with this type. The key is held in state `unknown` and is never run again by itself.",
    todo: "Do not retry with a new key: the action may have happened. The tool's status probe (when it has one) or an operator decides: resolved, retries get the result; released, the next retry runs it.",
  },
  invalid_state: {
    status: 409,
    title: "Not allowed in this state",
    retry: "no",
    happened: "An operator action (release, resolve) was refused because the key is not in a state that allows it, e.g. releasing a key that is already done.",
    todo: "Reload the key to see its current state; another operator or the original call may have finished it.",
  },
  stale_token: {
    status: 409,
    title: "Reservation no longer held",
    retry: "no",
    happened:
      "A complete, release or heartbeat of a reservation came with a token that is not the reservation's, or after the key was released (by an operator) or taken over while the caller ran its side effect. A complete is then not stored under the key: its result is kept in the audit log as a late completion, which operators see flagged.",
    todo: "Stop heartbeating: this caller no longer holds the key. Do not run the side effect again; an operator reconciles the late result in the console.",
  },
  name_taken: {
    status: 409,
    title: "Name already in use",
    retry: "with changes",
    happened: "A saved view was created or renamed with a name the same operator already gave another view of the same console page. Nothing changed.",
    todo: "Choose another name, or rename or delete the existing view first.",
  },
  probe_claimed: {
    status: 409,
    title: "Probe claimed by another process",
    retry: "no",
    happened:
      "A probe of a held call was claimed while another process holds a live claim on it, or while the call is waiting out its backoff after a probe that could not tell; or an answer came with a claim that is no longer the call's (it lapsed and another process claimed the call). Nothing changed.",
    todo: "Leave the call to the process that holds it; list held calls again later (Retry-After says when this one can be claimed).",
  },
  not_held: {
    status: 409,
    title: "Call no longer held",
    retry: "no",
    happened:
      "The call a probe was claimed or answered for is no longer held: an operator or another probe decided it, its own completion arrived, or a newer call holds the key. Nothing changed; an answer is kept in the audit trail as a late answer.",
    todo: "Nothing to do for this call; move on to the next held call.",
  },
  lease_running: {
    status: 409,
    title: "Call may still be running",
    retry: "no",
    happened:
      "A probe answered \"not applied\" for a call whose lease has not ended: the call may still be running and apply its effect after the probe looked. Nothing changed; the claim is kept.",
    todo: "Answer again once the call's lease has ended (leaseUntil in the listing, Retry-After), or answer \"unknown\" now so it is asked again later.",
  },
  limit_reached: {
    status: 409,
    title: "Limit reached",
    retry: "with changes",
    happened: "An operator already keeps the most saved views one console page allows (50). Nothing was saved.",
    todo: "Delete a view you no longer use, then save the new one.",
  },
  method_not_allowed: {
    status: 405,
    title: "Method not allowed",
    retry: "with changes",
    happened: "The path exists but does not take this HTTP method (a GET to an invoke route, say). Nothing ran.",
    todo: "Use the method the API reference gives for the path (GET /api/v1/openapi.json lists them).",
  },
  request_timeout: {
    status: 408,
    title: "Request timeout",
    retry: "yes",
    happened:
      "The request did not arrive in time: its body sent nothing for the server's idle limit (10 s by default), or the whole request took longer than the server allows (120 s). The connection is closed; nothing was run.",
    todo: "Send the body as one piece once the request starts; a client on a slow link sends smaller bodies.",
  },
  payload_too_large: {
    status: 413,
    title: "Request body too large",
    retry: "with changes",
    happened: "The request body is larger than the gateway accepts (1 MiB). Nothing was read or run.",
    todo: "Send smaller arguments; large payloads belong in storage with a reference in the arguments.",
  },
  unsupported_media_type: {
    status: 415,
    title: "Unsupported media type",
    retry: "with changes",
    happened: "The body was sent with a Content-Type other than JSON.",
    todo: "Send `Content-Type: application/json` (or any `+json` type).",
  },
  mismatch: {
    status: 422,
    title: "Idempotency-Key reused with other arguments",
    retry: "with changes",
    happened: "This Idempotency-Key was first used with other arguments (or another tool). A key names one action; reusing it for a different one is an error, not a replay.",
    todo: "Use a new key for a new action. If this is a retry, send exactly the arguments of the first call.",
  },
  headers_too_large: {
    status: 431,
    title: "Request header fields too large",
    retry: "with changes",
    happened: "The request's header fields together are larger than the server reads (16 KiB by default, Node.js's limit). The connection is closed; nothing was read or run.",
    todo: "Send fewer or shorter headers: usually an oversized cookie or a token pasted twice.",
  },
  abandoned: {
    status: 500,
    title: "Call abandoned",
    retry: "no",
    happened: "The tool's side effect ran, then the call was abandoned before its result could be stored (the handler crashed). The key stays reserved; after its lease it is stuck.",
    todo: "Do not assume the action failed. Retrying with the same key gets a conflict, then stuck, until an operator releases or resolves the key.",
  },
  internal: {
    status: 500,
    title: "Internal error",
    retry: "yes",
    happened: "An unexpected error in Idemgate itself. It has been logged with the request's path.",
    todo: "Retry with the same key: the key protects against a double side effect. If it persists, an operator should check the server log.",
  },
  tool_failed: {
    status: 502,
    title: "Tool failed",
    retry: "yes",
    happened:
      "The tool said its side effect did not happen: it refused before acting, its service could not be reached before the request was sent, or the service answered 408/425/429 or `Idemgate-Outcome: not-applied`. The key was released, so the failure is not stored.",
    todo: "Retry with the same key: the call runs again as new.",
  },
  server_busy: {
    status: 503,
    title: "Server busy",
    retry: "yes",
    happened: "The server already holds as many connections as it is configured to (IDEMGATE_MAX_CONNECTIONS). The connection is closed; nothing was run.",
    todo: "Retry shortly with the same key, with backoff; reuse connections (keep-alive) rather than opening one per call. Operators: raise the limit or add an instance.",
  },
  unavailable: {
    status: 503,
    title: "Service unavailable",
    headers: {
      "Retry-After": {
        value: String(UNAVAILABLE_RETRY_AFTER_SECONDS),
        description: `always ${UNAVAILABLE_RETRY_AFTER_SECONDS} (seconds): the key store or the database could not be reached; send the same request with the same key again after this, with backoff`,
      },
    },
    retry: "yes",
    happened: "The key store or the audit log could not be reached. Idemgate fails closed: nothing ran, so no side effect can happen without its record.",
    todo: "Retry later with the same key, with backoff. Operators: see the Status page.",
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
    retry: "no",
    happened:
      "An operator paused this write tool (`reason` says why, `pausedAt` since when): its new calls are refused before anything is reserved, so nothing ran and the key is as it was. A retry of a key that already has a result still gets it; reads go on.",
    todo: "Treat the call as not applied: do not run the action another way. Send it again with the same key once the tool is resumed (an operator resumes it from the console, the API or `idemgate tool resume`).",
  },
} satisfies Record<ProblemCode, ProblemEntry>;

/** The table, one entry per code (a code without an entry, or an entry without a code, does not compile). */
export const PROBLEMS: Readonly<Record<ProblemCode, ProblemEntry>> = ENTRIES;

/** Whether a string is a problem code; own entries only ("constructor" or "__proto__" is no problem type). */
export function isProblemCode(code: string): code is ProblemCode {
  return Object.hasOwn(PROBLEMS, code);
}

/** Every code, in the table's order. */
export const PROBLEM_CODES: readonly ProblemCode[] = Object.keys(PROBLEMS).filter(isProblemCode);

/** The problem types a client sends again with the same key: nothing ran, or the key is still held. */
export function retriedByClients(rule: RetryRule): boolean {
  return rule === "yes" || rule === "after Retry-After";
}
