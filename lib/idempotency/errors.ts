import { CONFLICT_RETRY_AFTER_MS, type ProblemCode } from "@/lib/problems/problems";
import { publicOutcomeNote } from "./outcome-note";
import { stateOf, type KeyRecord } from "./record";

export { CONFLICT_RETRY_AFTER_MS };

/**
 * Idemgate's errors: every way a call can end without a fresh or replayed result (below), the HTTP
 * layer's own (lib/http/http-errors.ts), the signals a tool throws (tool.ts) and the audit log's
 * (audit-port.ts). Each is an IdemgateError with a stable `code`: a ProblemCode (lib/problems, the
 * one table of status, title and retry rule) for what reaches a caller, with one class per code
 * (variants of a code are its subclasses), or a SignalCode for what the engine or a route handles
 * itself. What an error adds to its problem answer (a status of its own, headers, members such as
 * the held key's state) it states itself, as data in `problem`, which every copy of it carries.
 *
 * Next.js bundles instrumentation.ts (which opens the runtime) apart from the route handlers, so an
 * error thrown by the engine can be an instance of *another copy* of its class, and `instanceof` and
 * class names fail across that boundary. Errors are therefore recognized in one way only:
 * isIdemgateError(err, code?), which reads a brand kept under a registry symbol (Symbol.for gives
 * the same symbol in every copy of this module) and the error's code.
 */
const BRAND = Symbol.for("idemgate.error");

/**
 * Codes of errors that never reach a caller as a problem type of their own: a tool's signals
 * (tool.ts), the audit log's (audit-port.ts), the sign-in gate's. One that escapes is answered 500.
 */
export type SignalCode = "tool_final" | "tool_not_run" | "tool_outcome_unknown" | "tool_abandon" | "open_execution" | "password_check_busy";

/** What an error adds to its problem answer, beyond its type's status, title and headers. */
export interface ProblemDetails {
  /** a status of its own (one its type lists in otherStatuses) */
  status?: number;
  headers?: Readonly<Record<string, string>>;
  /** extension members of the problem body, after type, title, status, detail and instance */
  members?: Readonly<Record<string, unknown>>;
}

const NO_DETAILS: ProblemDetails = {};

export abstract class IdemgateError extends Error {
  abstract readonly code: ProblemCode | SignalCode;
  readonly [BRAND] = true;
  /** What this error adds to its problem answer (lib/http/problem.ts): set by the constructor of a class that adds anything. */
  problem: ProblemDetails = NO_DETAILS;
}

/** Whether `err` is an Idemgate error (of this code), whichever bundle's copy of its class threw it. */
export function isIdemgateError(err: unknown): err is IdemgateError;
export function isIdemgateError<C extends keyof ErrorOfCode>(err: unknown, code: C): err is ErrorOfCode[C];
export function isIdemgateError<C extends ProblemCode | SignalCode>(err: unknown, code: C): err is IdemgateError & { readonly code: C };
export function isIdemgateError(err: unknown, code?: string): boolean {
  if (typeof err !== "object" || err === null || (err as { [BRAND]?: unknown })[BRAND] !== true) return false;
  return code === undefined || (err as IdemgateError).code === code;
}

export class MissingKeyError extends IdemgateError {
  readonly code = "missing_key";
  constructor(readonly tool: string) {
    super(`${tool} changes something and needs an Idempotency-Key header naming this action`);
  }
}

export class InvalidKeyError extends IdemgateError {
  readonly code = "invalid_key";
  constructor(reason: string) {
    super(`Idempotency-Key is invalid: ${reason}`);
  }
}

export class UnknownToolError extends IdemgateError {
  readonly code = "unknown_tool";
  constructor(readonly tool: string) {
    super(`no tool named ${JSON.stringify(tool)}`);
  }
}

/**
 * A tool declared with `runs: "client"` asked to be invoked through the gateway (/invoke, MCP, the
 * console): Idemgate never runs such a tool; its caller runs it and settles it over the
 * reservation API.
 */
export class ClientRunToolError extends IdemgateError {
  readonly code = "runs_in_client";
  constructor(readonly tool: string) {
    super(
      `${tool} runs in its caller's own process (runs: client), so Idemgate cannot invoke it: reserve its key with ` +
        `POST /api/v1/tools/${tool}/reservations, run it, then POST /api/v1/executions/{executionId}/complete ` +
        `(or /release); the client libraries' guard() does all of this`,
    );
  }
}

export class InvalidArgumentsError extends IdemgateError {
  readonly code = "invalid_arguments";
  constructor(
    message: string,
    readonly issues: { path: string; message: string }[] = [],
  ) {
    super(message);
    if (issues.length) this.problem = { members: { errors: issues } };
  }
}

/** The problem members that say which key refused a call, and in what state it is. */
function heldKeyMembers(record: KeyRecord, nowMs = Date.now()): Record<string, unknown> {
  const members: Record<string, unknown> = {
    key: record.key,
    tool: record.tool,
    state: stateOf(record, nowMs),
    startedAt: new Date(record.createdAtMs).toISOString(),
  };
  if (record.leaseUntilMs !== null) members.leaseUntil = new Date(record.leaseUntilMs).toISOString();
  return members;
}

/** A suppression the caller must wait out or act on; carries the record that caused it. */
export abstract class SuppressionError extends IdemgateError {
  constructor(
    message: string,
    readonly record: KeyRecord,
  ) {
    super(message);
    this.problem = { members: heldKeyMembers(record) };
  }
}

export class ConflictError extends SuppressionError {
  readonly code = "conflict";
  readonly retryAfterMs = CONFLICT_RETRY_AFTER_MS;
  constructor(record: KeyRecord) {
    super(`a call with this key is still running; retry after it finishes`, record);
  }
}

export class StuckKeyError extends SuppressionError {
  readonly code = "stuck";
  constructor(record: KeyRecord) {
    super(
      `the call holding this key passed its lease without finishing; the side effect may or may not have happened. ` +
        `An operator must release the key (it did not happen) or resolve it (it did)`,
      record,
    );
  }
}

export class MismatchError extends SuppressionError {
  readonly code = "mismatch";
  constructor(record: KeyRecord) {
    super(`this key was first used with other arguments (or another tool); use a new key for a new action`, record);
  }
}

/**
 * `unavailable`: nothing ran, and the same call may be sent again shortly with the same key. Its
 * usual cause: the key store or the audit log could not be written (`component`); the subclasses
 * below are the others.
 */
export class UnavailableError extends IdemgateError {
  readonly code = "unavailable";
  constructor(
    /** what could not be reached; null for a cause of a subclass's */
    readonly component: "key_store" | "audit_log" | null,
    cause: unknown,
    message = `${component === "key_store" ? "the key store" : "the audit log"} is unavailable; nothing was run`,
  ) {
    super(message, { cause });
  }
}

/**
 * The call's intent became durable too close to the end of its lease (a slow audit log): another
 * caller may take the key over from then on, so it was not run. Its key was given back.
 */
export class LeasePassedError extends UnavailableError {
  constructor(readonly leaseUntilMs: number) {
    super(null, undefined, "the audit log wrote this call's intent only as its lease was ending; nothing was run, retry with the same key");
  }
}

/** `Prefer: wait` asked of a process already holding as many waiting calls as it may: nothing ran. */
export class TooManyWaitersError extends UnavailableError {
  constructor(
    readonly limit: number,
    /** whose slots are all taken: the whole process', or the caller's scope's share of them */
    readonly of: "process" | "scope" = "process",
  ) {
    super(
      null,
      undefined,
      of === "scope"
        ? `this server already holds ${limit} calls of your scope waiting for a running call's result, as many as one scope may; nothing was run, retry with the same key shortly`
        : `this server already holds ${limit} calls waiting for a running call's result; nothing was run, retry with the same key shortly`,
    );
  }
}

/**
 * The tool said its side effect did not happen; the key was released so a retry runs it. The
 * message is the tool's own (a NotRunError's), shown to the caller.
 */
export class ToolFailedError extends IdemgateError {
  readonly code = "tool_failed";
  constructor(
    message: string,
    readonly upstreamStatus?: number,
    readonly executionId?: string,
  ) {
    super(message);
    // which execution to ask an operator about; the details stay in the console
    if (executionId !== undefined) this.problem = { members: { executionId } };
  }
}

/**
 * `outcome_unknown`: the call ended without knowing whether its side effect happened (a timeout, a
 * 5xx, a reset after the request was sent, an exception after the tool started). The key is held in
 * state `unknown`; retries get 409 (UnknownOutcomeKeyError, below) until the tool's probe or an
 * operator decides, except at a service that deduplicates on the forwarded key, where a retry is
 * resent. Answered 504 for a timeout and 502 otherwise, with the problem type `outcome_unknown`
 * either way.
 */
export class OutcomeUnknownError extends IdemgateError {
  readonly code = "outcome_unknown";
  constructor(
    readonly key: string,
    readonly executionId: string,
    readonly note: string,
    private readonly timedOut: boolean,
    /** the tool's service deduplicates on the forwarded key: a retry with the same key is resent to it */
    resentOnRetry = false,
  ) {
    super(
      resentOnRetry
        ? `the tool's outcome is unknown (${note}): the action may have happened. The key is held; a retry with the same key ` +
            `is sent to the service again, which deduplicates on that key and answers with the first call's result if it ran`
        : `the tool's outcome is unknown (${note}): the action may have happened. The key is held and will not run again ` +
            `by itself; a retry gets 409 until the tool's status probe or an operator decides`,
    );
    // which execution to ask an operator about; the details stay in the console
    this.problem = { status: this.status, members: { executionId, key, state: "unknown" } };
  }

  get status(): number {
    return this.timedOut ? 504 : 502;
  }
}

/**
 * A duplicate of a call whose outcome is unknown: it may have happened, so the key stays held until
 * the tool's probe or an operator decides. Never runs again by itself. Answered 409 with the held
 * key's record, as the other suppressions are.
 */
export class UnknownOutcomeKeyError extends OutcomeUnknownError {
  constructor(readonly record: KeyRecord) {
    super(record.key, record.executionId ?? "", record.outcomeNote ?? "", false);
    this.message =
      `the first call with this key ended without knowing whether its side effect happened${record.outcomeNote ? ` (${publicOutcomeNote(record.outcomeNote)})` : ""}; ` +
      `the key is held and the action will not run again until the tool's status probe or an operator decides (it happened: resolve; it did not: release)`;
    this.problem = { members: heldKeyMembers(record) };
  }

  override get status(): number {
    return 409;
  }
}

/** The handler abandoned the call as a crashed process would: the key stays inflight. */
export class CallAbandonedError extends IdemgateError {
  readonly code = "abandoned";
  constructor() {
    super("the call was abandoned after its side effect; the key stays reserved until an operator decides");
  }
}

/** An operator action asked of a key in a state that does not allow it. */
export class InvalidStateError extends IdemgateError {
  readonly code = "invalid_state";
  constructor(
    message: string,
    readonly current: KeyRecord | null,
  ) {
    super(message);
  }
}

export class NotFoundError extends IdemgateError {
  readonly code = "not_found";
}

/**
 * A settle (complete, release, heartbeat) named an execution this caller has no reservation for:
 * unknown, of another tenant, or not of a tool run by its caller. One answer for all, so nothing
 * tells one from another.
 */
export class ExecutionNotFoundError extends NotFoundError {
  constructor() {
    super("no reservation with this execution id for this API token");
  }
}

/**
 * A settle with a token that is not the reservation's, or of a reservation whose key was released
 * or taken over meanwhile: the caller no longer holds the key.
 */
export class StaleTokenError extends IdemgateError {
  readonly code = "stale_token";
  constructor(
    readonly executionId: string,
    detail: string,
  ) {
    super(detail);
    this.problem = { members: { executionId } };
  }
}

/**
 * A list cursor this server did not hand out for this listing: malformed, tampered with, sealed
 * under another secret, or issued for another filter (another scope, tool, state or prefix).
 */
export class InvalidCursorError extends IdemgateError {
  readonly code = "invalid_cursor";
  constructor() {
    super("the cursor is not one this server issued for this listing; start again from the first page (no cursor)");
    this.name = "InvalidCursorError";
  }
}

/**
 * The class of each code thrown from here, so isIdemgateError(err, code) narrows to it whichever
 * bundle's copy threw it. One class per code; a variant of a code is a subclass of its class.
 */
interface ErrorOfCode {
  missing_key: MissingKeyError;
  invalid_key: InvalidKeyError;
  unknown_tool: UnknownToolError;
  runs_in_client: ClientRunToolError;
  invalid_arguments: InvalidArgumentsError;
  conflict: ConflictError;
  stuck: StuckKeyError;
  mismatch: MismatchError;
  outcome_unknown: OutcomeUnknownError;
  unavailable: UnavailableError;
  tool_failed: ToolFailedError;
  abandoned: CallAbandonedError;
  invalid_state: InvalidStateError;
  not_found: NotFoundError;
  stale_token: StaleTokenError;
  invalid_cursor: InvalidCursorError;
}
