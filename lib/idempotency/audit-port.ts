import { IdemgateError } from "./errors";
/** How a call reached Idemgate: the HTTP gateway or the MCP endpoint. */
export type Transport = "http" | "mcp";

/** What the engine writes to the audit log. lib/audit implements it over Prisma. */
export interface IntentEntry {
  id: string;
  scope: string;
  key: string;
  tool: string;
  fingerprint: string;
  token: number;
  session: string | null;
  caller: string | null;
  /** optional for writers of other origins (the default is http) */
  transport?: Transport;
  fallback: boolean;
  startedAt: Date;
  leaseUntil: Date;
  /** the call's arguments as its tool keeps them for operators (canonical JSON), and how; null: none kept */
  arguments?: string | null;
  argumentsKept?: "redacted" | "full" | null;
}

/**
 * succeeded / final_error: a result stored under the key; failed: the tool said nothing happened
 * (the key was released); unknown: the call ended without knowing whether its side effect
 * happened (the key is held); late_completion: a result that arrived after the key was released or
 * taken over.
 */
export type ExecutionOutcome = "succeeded" | "failed" | "final_error" | "unknown" | "late_completion";

/**
 * How an execution without a known outcome ends by someone else's decision: released (treated as
 * not having happened), resolved (confirmed to have happened), or retried (sent again with the same
 * key to a service that deduplicates on it).
 */
export type ClosedOutcome = "released" | "resolved" | "retried";

export interface OutcomeEntry {
  id: string;
  outcome: ExecutionOutcome;
  finishedAt: Date;
  durationMs: number;
  resultStatus: number | null;
  /** the stored result's body and finality, kept so duplicates can be answered after a key-store loss */
  resultBody: string | null;
  resultFinal: boolean | null;
  /** for a stored result: when its done record is due to leave the key store */
  expiresAt: Date | null;
  error: string | null;
  /** an unknown outcome's answer from the tool's service, when it gave one (capped) */
  answerStatus?: number | null;
  answerBody?: string | null;
}

/**
 * replay, conflict, stuck, unknown, mismatch: the record under the call's key; fresh_key: an
 * advisory (model-minted) key met an identical call under another key within the tool's arguments
 * window, and got that call's result.
 */
export type SuppressionKind = "replay" | "conflict" | "stuck" | "unknown" | "mismatch" | "fresh_key";

export interface SuppressionEntry {
  id: string;
  scope: string;
  key: string;
  tool: string;
  kind: SuppressionKind;
  fallback: boolean;
  gapMs: number | null;
  session: string | null;
  caller: string | null;
  transport?: Transport;
  originalSession: string | null;
  originalExecutionId: string | null;
  at: Date;
}

/** What the audit log knows of a key's latest execution, for answering after a key-store loss. */
export interface PriorExecution {
  id: string;
  /** the fencing token of the reservation it ran under */
  token: number;
  fingerprint: string;
  tool: string;
  session: string | null;
  startedAt: Date;
  leaseUntil: Date;
  outcome: ExecutionOutcome | ClosedOutcome | null;
  resultStatus: number | null;
  resultBody: string | null;
  resultFinal: boolean | null;
  expiresAt: Date | null;
  /** for an unknown outcome: why (its note) and when it ended */
  error: string | null;
  finishedAt: Date | null;
}

/** One execution as the log has it (queued rows included): what settling a reservation needs. */
export interface ExecutionRow extends PriorExecution {
  scope: string;
  key: string;
  fallback: boolean;
}

/**
 * After a key-store loss, a call that never finished (open, or its outcome unknown) keeps its key
 * held through the audit log this long after the loss, whatever its tool's TTL: only a decision
 * frees such a key, never the passing of time within this window.
 */
export const OPEN_CALL_RECOVERY_MS = 7 * 24 * 60 * 60 * 1000;

/** How an outcome's error starts when its result could not be stored as a done record. */
export const COMPLETION_NOT_STORED = "completion not stored";

/** The log already has an execution of this key without an outcome: a second one may not start. */
export class OpenExecutionError extends IdemgateError {
  readonly code = "open_execution";
  constructor(
    readonly scope: string,
    readonly key: string,
  ) {
    super(`another execution of ${scope}/${key} has not finished`);
    this.name = "OpenExecutionError";
  }
}

export interface AuditWriter {
  /**
   * durable: in the database when the promise resolves (OpenExecutionError while another execution
   * of the key is open); async: queued, unless `options.durable` asks for the database in any mode
   * (a reservation handed to a caller, which any server process may be asked to settle)
   */
  intent(entry: IntentEntry, options?: { durable?: boolean }): Promise<void>;
  /** the execution with this id, queued rows included; null when the log has none */
  execution(id: string): Promise<ExecutionRow | null>;
  /** a heartbeat moved an open execution's lease: the log's orphan checks wait for the new one */
  extendLease(id: string, leaseUntil: Date): Promise<void>;
  /** queued and written in batches off the hot path */
  outcome(entry: OutcomeEntry): void;
  suppression(entry: SuppressionEntry): void;
  /** writes everything queued */
  flush(): Promise<void>;
  /** the latest execution of (scope, key) that started at or after `since`, queued rows included */
  priorExecution(scope: string, key: string, since: Date): Promise<PriorExecution | null>;
  /**
   * Until when results recorded before `epochMs` may still be asked for: the latest expiry of a
   * result, or lease of an unfinished call, among executions that started before it. null: none.
   */
  recoveryWindowEnd(epochMs: number): Promise<number | null>;
  /**
   * Ends an execution that never reported an outcome, or whose outcome is unknown, by an operator's,
   * a probe's or a takeover's decision. A release that meets a result already written without a
   * done record (the call completed while it was being released) turns it into a late completion.
   */
  closeOpenExecution(
    executionId: string,
    outcome: ClosedOutcome,
    reason: string,
    /** for resolved: the result the operator supplied, replayed from the log after a key-store loss */
    result?: { status: number; body: string; final: boolean; expiresAt: Date },
  ): Promise<boolean>;
}
