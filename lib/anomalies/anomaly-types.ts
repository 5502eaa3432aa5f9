import type { KeyState } from "@/lib/idempotency/record";

export const ANOMALY_TYPES = [
  "orphan_unknown_outcome",
  "orphan_lost_completion",
  "orphan_late_completion",
  "orphan_unrecorded_effect",
  "stale_suppression",
  "fresh_key_duplicate",
  "result_over_scope_limit",
  "key_store_loss",
] as const;
export type AnomalyType = (typeof ANOMALY_TYPES)[number];

/** Times in evidence are ISO strings: it is stored as JSON and read by people. */
type Iso = string;

/** The key as the reconciler found it: its state, and which execution holds it. */
interface KeyAtDetection {
  keyState: KeyState | "absent";
  keyHeldBy: string | null;
}

/** A call whose side effect may or may not have happened, with no decision about its key yet. */
export interface UnknownOutcomeEvidence extends KeyAtDetection {
  executionId: string;
  token: number;
  session: string | null;
  startedAt: Iso;
  leaseUntil: Iso;
  /**
   * reported: the call ended saying it cannot tell (a timeout, a 5xx, an exception), flagged at once;
   * silent: it never reported an outcome and its lease passed (a crash)
   */
  cause: "reported" | "silent";
  /** reported: why the outcome is unknown ("timed out after 400 ms", "the service answered 502") */
  note: string | null;
  /** reported: when the call ended */
  unknownAt: Iso | null;
}

/**
 * What a retry of a lost completion's call is told, as the engine decides it when the reconciler
 * looks: the key's current record answers it; the engine gives the result back from the audit log
 * (a store that lost data, a result the log keeps); or the side effect runs again.
 */
export type LostCompletionRetry = "answered_by_record" | "restored_from_audit_log" | "runs_again";

export interface LostCompletionEvidence extends KeyAtDetection {
  executionId: string;
  finishedAt: Iso | null;
  expiresAt: Iso | null;
  resultStatus: number | null;
  error: string | null;
  /** absent in findings stored before it was recorded */
  retry?: LostCompletionRetry;
  /** the dedupe key of the key-store loss this record was lost in (absent: not lost with the store) */
  incident?: string;
}

/** A done record the key store lost whose result the audit log does not give back: a person must look. */
export interface LossNotRestored {
  scope: string;
  key: string;
  executionId: string;
  retry: LostCompletionRetry;
}

/**
 * The key store lost done records (a restart without persistence, a flush, a failover): one
 * incident per loss, however many records, rather than one anomaly per key. Records whose result
 * the audit log gives back to a retry need nobody (their per-key findings are stored resolved);
 * the others stay open per key and are listed here.
 */
export interface KeyStoreLossEvidence {
  /** when the reconciler first and last found a record lost in it */
  firstFoundAt: Iso;
  lastFoundAt: Iso;
  /** the earliest time the store says it holds data since, of the keys found (null: none written there since) */
  storeHoldsDataSince: Iso | null;
  /** done records found lost (each execution once) */
  records: number;
  /** of those, whose result the audit log gives back to a retry: nothing runs again */
  restored: number;
  /** the others, each an open per-key anomaly */
  notRestored: number;
  /** the first of those (at most LOSS_LISTED) */
  notRestoredKeys: LossNotRestored[];
}

export interface LateCompletionEvidence {
  executionId: string;
  token: number;
  startedAt: Iso;
  finishedAt: Iso | null;
  leaseUntil: Iso;
  error: string | null;
}

export interface UnrecordedEffectEvidence {
  effectId: string;
  createdAt: Iso;
  key: string | null;
}

export interface StaleSuppressionEvidence {
  suppressionId: string;
  at: Iso;
  gapMs: number | null;
  session: string | null;
  originalSession: string | null;
  originalExecutionId: string | null;
  fallback: boolean;
  /** each one sentence, the first one is the summary's */
  reasons: string[];
  staleThresholdMs: number;
  /** replays of the tool the threshold was derived from */
  samples: number;
}

/** One of the two executions of a fresh-key duplicate, as the audit log has it. */
export interface FreshKeyExecution {
  executionId: string;
  key: string;
  /** the key was a fallback (arguments-hash) key: the call sent none */
  fallback: boolean;
  session: string | null;
  /** the API token that called */
  caller: string | null;
  startedAt: Iso;
  /** succeeded | final_error | unknown | late_completion | resolved, or null: no outcome past its lease */
  outcome: string | null;
  resultStatus: number | null;
  /** the stored result's body, at most FRESH_KEY_BODY_LIMIT characters */
  resultBody: string | null;
  resultBodyTruncated: boolean;
}

/**
 * One tool in one scope ran twice for identical arguments under two keys within its retry window:
 * a retry under a fresh key, so the side effect probably happened twice.
 */
export interface FreshKeyDuplicateEvidence {
  fingerprint: string;
  /** the earlier execution */
  original: FreshKeyExecution;
  /** the later one: the duplicate that got through */
  duplicate: FreshKeyExecution;
  /** from the original's start to the duplicate's */
  gapMs: number;
  /** the tool's retry window when it was flagged */
  windowMs: number;
  /** retry_gaps: derived from the tool's replay gaps; default: too few replays, the default window */
  windowSource: "retry_gaps" | "default";
  /** replays of the tool the window was derived from (last 7 days) */
  samples: number;
}

/** A completion stored as a placeholder: its scope's stored results were at their limit. */
export interface ResultOverScopeLimitEvidence {
  /** the first such completion of the scope that day */
  executionId: string;
  key: string;
  finishedAt: Iso;
  /** the result's size, which was not kept */
  resultBytes: number | null;
  /** IDEMGATE_SCOPE_RESULT_BYTES when it was stored */
  limitBytes: number | null;
}

export interface EvidenceByType {
  orphan_unknown_outcome: UnknownOutcomeEvidence;
  orphan_lost_completion: LostCompletionEvidence;
  orphan_late_completion: LateCompletionEvidence;
  orphan_unrecorded_effect: UnrecordedEffectEvidence;
  stale_suppression: StaleSuppressionEvidence;
  fresh_key_duplicate: FreshKeyDuplicateEvidence;
  result_over_scope_limit: ResultOverScopeLimitEvidence;
  key_store_loss: KeyStoreLossEvidence;
}

/** A finding of one check, stored once by its dedupe key; the evidence's shape follows its type. */
export type NewAnomaly = {
  [T in AnomalyType]: {
    type: T;
    dedupeKey: string;
    tool: string;
    scope: string | null;
    key: string | null;
    summary: string;
    evidence: EvidenceByType[T];
  };
}[AnomalyType];

/** The finding of one type, for code that builds or reads only that type. */
export type AnomalyOf<T extends AnomalyType> = Extract<NewAnomaly, { type: T }>;
