import { PROBLEM_CODES, problemInfo } from "@/lib/http/problem";

/**
 * What each problem type (`/problems/<code>`) means for a caller: what happened, and what to do.
 * Status and title come from lib/http/problem.ts, the one place that maps codes to statuses.
 */
export interface ProblemDoc {
  code: string;
  status: number;
  title: string;
  happened: string;
  todo: string;
  /** whether the same request may simply be sent again */
  retry: "yes" | "after Retry-After" | "no" | "with changes";
}

export const RETRY_LABELS: Record<ProblemDoc["retry"], string> = {
  yes: "yes, with the same key",
  "after Retry-After": "after Retry-After, with the same key",
  no: "no",
  "with changes": "only after fixing the request",
};

const TEXT: Record<string, Omit<ProblemDoc, "code" | "status" | "title">> = {
  missing_key: {
    happened: "A write tool was called without an Idempotency-Key header, and the tool did not opt into fallback dedupe. Nothing ran.",
    todo: "Mint one key per logical action (a UUID is fine), send it as Idempotency-Key, and send the same key on every retry of that action.",
    retry: "with changes",
  },
  invalid_key: {
    happened: "The Idempotency-Key is empty, longer than 255 characters, holds characters other than printable ASCII, or starts with the reserved prefix \"fallback:\". Nothing ran.",
    todo: "Send 1–255 printable ASCII characters. Keys are compared byte for byte and never normalized.",
    retry: "with changes",
  },
  invalid_arguments: {
    happened: "The JSON body does not match the tool's argument schema. The `errors` member lists each problem with its path. No key was reserved.",
    todo: "Fix the arguments (see the API reference for the schema) and send the call again; the same key may be used, since nothing was reserved.",
    retry: "with changes",
  },
  invalid_json: {
    happened: "The body is not valid UTF-8 JSON. Nothing ran.",
    todo: "Send the arguments as a JSON object with Content-Type: application/json.",
    retry: "with changes",
  },
  invalid_header: {
    happened: "A header Idemgate reads (such as Idemgate-Session) has an invalid value, or Idempotency-Key was sent more than once. Nothing ran.",
    todo: "Idemgate-Session takes 1–200 visible ASCII characters. Send Idempotency-Key once; a key holding a \",\" goes as a quoted string (\"a,b\"). Correct the header and send again.",
    retry: "with changes",
  },
  invalid_request: {
    happened: "The request is malformed in a way the other types do not cover, e.g. an invalid query parameter or scope.",
    todo: "Read `detail` and `errors`, correct the request and send it again.",
    retry: "with changes",
  },
  invalid_cursor: {
    happened:
      "The `cursor` of a list request is not one this server handed out for this listing: it was changed, it comes from a listing with other filters (scope, tool, state, prefix), or the server's secret (IDEMGATE_SECRET) changed since. Cursors are sealed and opaque; nothing was read.",
    todo: "Pass back a `nextCursor` unchanged, with the same filters it came with; otherwise start again from the first page (no cursor).",
    retry: "with changes",
  },
  runs_in_client: {
    happened: "The tool is declared with `runs: client`: it runs in its caller's own process, so Idemgate cannot invoke it through /invoke or MCP. Nothing was reserved.",
    todo: "Guard the function where it runs: reserve with POST /api/v1/tools/{tool}/reservations, run it after a 201, then complete or release the execution. The client libraries' guard() does this for you.",
    retry: "with changes",
  },
  unauthorized: {
    happened: "No API token was sent, or the token is unknown or revoked (for console routes: no signed-in session).",
    todo: "Send `Authorization: Bearer <token>`. Create a token with `npx idemgate token create --scope NAME`.",
    retry: "with changes",
  },
  forbidden: {
    happened: "The caller is known but may not do this: an API token asked for another scope or an operator-only action, a viewer tried to change something, or a console request came from another origin.",
    todo: "Use a token or an operator account with the needed permission. Retrying unchanged will not help.",
    retry: "no",
  },
  unknown_tool: {
    happened: "No tool by this name is configured.",
    todo: "Check the name against GET /api/v1/tools or the API reference; tool names are case-sensitive.",
    retry: "no",
  },
  not_found: {
    happened: "The resource (for example a key under /api/v1/keys/{scope}/{key}) does not exist, or is not visible to this caller.",
    todo: "Check the path; remember that each path segment must be URL-encoded.",
    retry: "no",
  },
  conflict: {
    happened: "Another call with the same key is running right now (the key is inflight and its lease is valid). This call was suppressed so the side effect cannot run twice.",
    todo: "Wait the Retry-After seconds and send the same request with the same key: you get the first call's result once it finishes. Do not mint a new key, that would run the action again.",
    retry: "after Retry-After",
  },
  stuck: {
    happened: "A call with this key started but never finished within its lease: the process holding it probably crashed. The side effect may or may not have happened, so Idemgate will not guess.",
    todo: "An operator decides in the console: release the key (the side effect did not happen; the next retry runs it) or resolve it with the result (it did happen). Retrying before that gets this answer again.",
    retry: "no",
  },
  invalid_state: {
    happened: "An operator action (release, resolve) was refused because the key is not in a state that allows it, e.g. releasing a key that is already done.",
    todo: "Reload the key to see its current state; another operator or the original call may have finished it.",
    retry: "no",
  },
  name_taken: {
    happened: "A saved view was created or renamed with a name the same operator already gave another view of the same console page. Nothing changed.",
    todo: "Choose another name, or rename or delete the existing view first.",
    retry: "with changes",
  },
  limit_reached: {
    happened: "An operator already keeps the most saved views one console page allows (50). Nothing was saved.",
    todo: "Delete a view you no longer use, then save the new one.",
    retry: "with changes",
  },
  stale_token: {
    happened: "A complete, release or heartbeat of a reservation came with a token that is not the reservation's, or after the key was released (by an operator) or taken over while the caller ran its side effect. A complete is then not stored under the key: its result is kept in the audit log as a late completion, which operators see flagged.",
    todo: "Stop heartbeating: this caller no longer holds the key. Do not run the side effect again; an operator reconciles the late result in the console.",
    retry: "no",
  },
  probe_claimed: {
    happened:
      "A probe of a held call was claimed while another process holds a live claim on it, or while the call is waiting out its backoff after a probe that could not tell; or an answer came with a claim that is no longer the call's (it lapsed and another process claimed the call). Nothing changed.",
    todo: "Leave the call to the process that holds it; list held calls again later (Retry-After says when this one can be claimed).",
    retry: "no",
  },
  not_held: {
    happened:
      "The call a probe was claimed or answered for is no longer held: an operator or another probe decided it, its own completion arrived, or a newer call holds the key. Nothing changed; an answer is kept in the audit trail as a late answer.",
    todo: "Nothing to do for this call; move on to the next held call.",
    retry: "no",
  },
  lease_running: {
    happened:
      "A probe answered \"not applied\" for a call whose lease has not ended: the call may still be running and apply its effect after the probe looked. Nothing changed; the claim is kept.",
    todo: "Answer again once the call's lease has ended (leaseUntil in the listing, Retry-After), or answer \"unknown\" now so it is asked again later.",
    retry: "no",
  },
  method_not_allowed: {
    happened: "The path exists but does not take this HTTP method (a GET to an invoke route, say). Nothing ran.",
    todo: "Use the method the API reference gives for the path (GET /api/v1/openapi.json lists them).",
    retry: "with changes",
  },
  request_timeout: {
    happened: "The request did not arrive in time: its body sent nothing for the server's idle limit (10 s by default), or the whole request took longer than the server allows (120 s). The connection is closed; nothing was run.",
    todo: "Send the body as one piece once the request starts; a client on a slow link sends smaller bodies.",
    retry: "yes",
  },
  server_busy: {
    happened: "The server already holds as many connections as it is configured to (IDEMGATE_MAX_CONNECTIONS). The connection is closed; nothing was run.",
    todo: "Retry shortly with the same key, with backoff; reuse connections (keep-alive) rather than opening one per call. Operators: raise the limit or add an instance.",
    retry: "yes",
  },
  payload_too_large: {
    happened: "The request body is larger than the gateway accepts (1 MiB). Nothing was read or run.",
    todo: "Send smaller arguments; large payloads belong in storage with a reference in the arguments.",
    retry: "with changes",
  },
  headers_too_large: {
    happened: "The request's header fields together are larger than the server reads (16 KiB by default, Node.js's limit). The connection is closed; nothing was read or run.",
    todo: "Send fewer or shorter headers: usually an oversized cookie or a token pasted twice.",
    retry: "with changes",
  },
  unsupported_media_type: {
    happened: "The body was sent with a Content-Type other than JSON.",
    todo: "Send `Content-Type: application/json` (or any `+json` type).",
    retry: "with changes",
  },
  mismatch: {
    happened: "This Idempotency-Key was first used with other arguments (or another tool). A key names one action; reusing it for a different one is an error, not a replay.",
    todo: "Use a new key for a new action. If this is a retry, send exactly the arguments of the first call.",
    retry: "with changes",
  },
  abandoned: {
    happened: "The tool's side effect ran, then the call was abandoned before its result could be stored (the handler crashed). The key stays reserved; after its lease it is stuck.",
    todo: "Do not assume the action failed. Retrying with the same key gets a conflict, then stuck, until an operator releases or resolves the key.",
    retry: "no",
  },
  internal: {
    happened: "An unexpected error in Idemgate itself. It has been logged with the request's path.",
    todo: "Retry with the same key: the key protects against a double side effect. If it persists, an operator should check the server log.",
    retry: "yes",
  },
  tool_failed: {
    happened: "The tool said its side effect did not happen: it refused before acting, its service could not be reached before the request was sent, or the service answered 408/425/429 or `Idemgate-Outcome: not-applied`. The key was released, so the failure is not stored.",
    todo: "Retry with the same key: the call runs again as new.",
    retry: "yes",
  },
  outcome_unknown: {
    happened: "The call ended without knowing whether its side effect happened: the tool timed out (504), its service answered 5xx or a redirect, the connection broke after the request was sent, or the tool threw after it started (502). A retry of such a key gets 409 with this type. The key is held in state `unknown` and is never run again by itself.",
    todo: "Do not retry with a new key: the action may have happened. The tool's status probe (when it has one) or an operator decides: resolved, retries get the result; released, the next retry runs it.",
    retry: "no",
  },
  tool_paused: {
    happened:
      "An operator paused this write tool (`reason` says why, `pausedAt` since when): its new calls are refused before anything is reserved, so nothing ran and the key is as it was. A retry of a key that already has a result still gets it; reads go on.",
    todo: "Treat the call as not applied: do not run the action another way. Send it again with the same key once the tool is resumed (an operator resumes it from the console, the API or `idemgate tool resume`).",
    retry: "no",
  },
  unavailable: {
    happened: "The key store or the audit log could not be reached. Idemgate fails closed: nothing ran, so no side effect can happen without its record.",
    todo: "Retry later with the same key, with backoff. Operators: see the Status page.",
    retry: "yes",
  },
};

export function problemDoc(code: string): ProblemDoc | null {
  const info = problemInfo(code);
  if (!info) return null;
  const text = (Object.hasOwn(TEXT, code) ? TEXT[code] : undefined) ?? {
    happened: `The gateway answered ${info.status}: ${info.title.toLowerCase()}.`,
    todo: "Read the `detail` member of the response.",
    retry: info.status >= 500 ? ("yes" as const) : ("no" as const),
  };
  return { code, ...info, ...text };
}

export function allProblemDocs(): ProblemDoc[] {
  return PROBLEM_CODES.map((code) => problemDoc(code)!).sort((a, b) => a.status - b.status || a.code.localeCompare(b.code));
}
