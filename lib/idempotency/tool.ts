import { IdemgateError, isIdemgateError } from "./errors";
import type { ArgumentRetention } from "./kept-arguments";
/** What the engine needs to know of a tool. The registry (lib/tools) adds schemas and upstreams. */
export interface ToolPolicy {
  name: string;
  kind: "read" | "write";
  /** how long a done record is replayed */
  ttlMs: number;
  /** how long an inflight reservation is trusted */
  leaseMs: number;
  /** what a call meeting a stuck key gets: an operator decides (block) or it runs again (takeover) */
  stuckPolicy: "block" | "takeover";
  /** keyless calls are deduplicated by their arguments for this long; null: keyless writes are refused */
  fallbackTtlMs: number | null;
  /**
   * the tool's service honours the forwarded idempotency key itself (as Stripe does): a call whose
   * outcome is unknown (or stuck) may be sent again with the same key, and the service applies it
   * at most once
   */
  dedupes: boolean;
  /**
   * the longest the tool's own call takes once started (an upstream's timeoutMs): the engine runs a
   * call only while the rest of its lease covers this, so a call never outlives its lease and a
   * takeover never sends a second copy beside it; unbounded (in-process) tools leave it out
   */
  runTimeoutMs?: number;
  /**
   * a read the audit log records: a tool that is idempotent by its own word (an MCP server's
   * `idempotentHint`), passed through without a key but audited (DESIGN.md § MCP); writes are
   * always recorded, other reads never
   */
  audited?: boolean;
  /**
   * `client`: the tool runs in its caller's own process, guarded over the reservation API
   * (reserve, run, complete or release; DESIGN.md § "Tools that run where they live"). Idemgate
   * holds its keys, results and audit log but never runs it: it cannot be invoked through the
   * gateway's /invoke or MCP. Absent: Idemgate runs it (in process or by forwarding to its service).
   */
  runs?: "client";
  /**
   * declared `paused: true` in the configuration file: new first executions are refused as when an
   * operator pauses the tool (lib/idempotency/paused-tools.ts); only a new declaration resumes it
   */
  paused?: boolean;
  /**
   * what each execution keeps of the call's arguments for operators (DESIGN.md § Arguments kept
   * for operators); absent: redacted, with no pointers of its own
   */
  argumentRetention?: ArgumentRetention;
}

export interface ToolContext {
  scope: string;
  /** null for reads */
  key: string | null;
  session: string | null;
  executionId: string | null;
  signal?: AbortSignal;
}

export interface ToolResult {
  /** HTTP-like status, 200 unless the tool says otherwise */
  status?: number;
  body: unknown;
}

export type RunTool = (args: unknown, ctx: ToolContext) => Promise<ToolResult>;

/**
 * Thrown by a tool for an outcome that is final (a card declined): stored like a result and replayed.
 */
export class FinalToolError extends IdemgateError {
  readonly code = "tool_final";
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`final error ${status}`);
    this.name = "FinalToolError";
  }
}

/** Also recognizes a FinalToolError thrown by another bundle's copy of this module (see errors.ts). */
export function isFinalToolError(err: unknown): err is FinalToolError {
  return isIdemgateError(err, "tool_final");
}

/**
 * Thrown by a tool that knows its side effect did not happen (it refused before acting, its service
 * could not be reached before a byte was sent, the service answered that it applied nothing). This
 * is the only way a call frees its key: the reservation is released and a retry runs. Any other
 * exception means the outcome is unknown and the key stays held.
 */
export class NotRunError extends IdemgateError {
  readonly code = "tool_not_run";
  constructor(
    message: string,
    /** the service's status when it answered (408, 425, 429, or an explicit not-applied answer) */
    readonly upstreamStatus?: number,
  ) {
    super(message);
    this.name = "NotRunError";
  }
}

export function isNotRunError(err: unknown): err is NotRunError {
  return isIdemgateError(err, "tool_not_run");
}

/**
 * Thrown by a tool that cannot tell whether its side effect happened, with a note for operators and
 * callers ("timed out after 400 ms", "the service answered 502") and an optional detail for
 * operators only. Any exception other than NotRunError,
 * FinalToolError and AbandonCall is treated the same way; this one carries a readable note.
 */
export class OutcomeUnknown extends IdemgateError {
  readonly code = "tool_outcome_unknown";
  constructor(
    readonly note: string,
    /** the call timed out (the gateway answers 504 rather than 502) */
    readonly timedOut: boolean = false,
    /**
     * what only operators read (key page, audit log) after the note, such as another server's
     * error text, which may name its internals; callers read the note alone
     */
    readonly detail?: string,
    /**
     * the tool's service's answer when it gave one (a 5xx, a redirect): kept with the execution,
     * capped, for the operator who resolves the key to start from
     */
    readonly answer?: { status: number; body: string },
  ) {
    super(note);
    this.name = "OutcomeUnknown";
  }
}

export function isOutcomeUnknown(err: unknown): err is OutcomeUnknown {
  return isIdemgateError(err, "tool_outcome_unknown");
}

/**
 * What a tool answers when asked whether a call's side effect happened (its status probe):
 * applied, with the result the call produced; not applied; or it cannot tell.
 */
export type ProbeAnswer =
  | { outcome: "applied"; status: number; body: unknown }
  | { outcome: "not_applied" }
  /**
   * candidate: a result the tool found that may be this call's (matched by its arguments rather than
   * its key): it decides nothing, but an operator resolving the key starts from it
   */
  | { outcome: "unknown"; note?: string; candidate?: { status: number; body: unknown } };

export interface ProbeContext {
  scope: string;
  /** the caller's idempotency key */
  key: string;
  /** the execution whose outcome is asked for, when the key store knows it */
  executionId: string | null;
  /**
   * the call's arguments as its execution kept them (redacted per the tool's argument policy); null
   * when the tool keeps none, or the audit log no longer has them
   */
  arguments?: unknown;
  signal?: AbortSignal;
}

/**
 * A tool's status probe. It identifies the call by its scope and key (or the derived key an
 * upstream received); the kept arguments help a tool whose own records are not keyed.
 */
export type ProbeTool = (ctx: ProbeContext) => Promise<ProbeAnswer>;

/** Thrown by a tool to abandon the call exactly as a crashed process would (simulation). */
export class AbandonCall extends IdemgateError {
  readonly code = "tool_abandon";
  constructor() {
    super("call abandoned");
    this.name = "AbandonCall";
  }
}

export function isAbandonCall(err: unknown): err is AbandonCall {
  return isIdemgateError(err, "tool_abandon");
}

export const DEFAULT_POLICY = {
  ttlMs: 24 * 60 * 60 * 1000,
  leaseMs: 60 * 1000,
  stuckPolicy: "block" as const,
  fallbackTtlMs: null,
  dedupes: false,
  retentionMs: 7 * 24 * 60 * 60 * 1000,
  fallbackDefaultTtlMs: 60 * 1000,
};

/**
 * A call whose intent is durable later than this before its lease ends (or whose own timeout would
 * reach into it) is not run: clocks of the gateways sharing a key store differ a little, and the
 * tool needs the lease to start its call.
 */
export function leaseMarginMs(leaseMs: number): number {
  return Math.min(1_000, Math.floor(leaseMs / 10));
}
