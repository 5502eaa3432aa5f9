import type { PriorExecution } from "./audit-port";
import type { BeginInput, OperatorGuard, OperatorRefusal } from "./key-store";
import { stateOf, type KeyRecord, type StoredResult } from "./record";

/**
 * Every change a key's record may go through, decided here and nowhere else: pure functions of the
 * record found and the request, no I/O. The stores apply them: the in-memory store calls them, the
 * SQL store after its locked read, and the Redis scripts mirror them in includes/rules.lua (a
 * property test runs random sequences against both and requires the same answers).
 *
 * The states themselves are derived by `stateOf` (record.ts): inflight → stuck once the lease
 * passed, done → expired once the result's TTL passed, unknown whatever the time.
 */

/** What a reservation asks of the record it finds. */
export type BeginRequest = Pick<BeginInput, "fingerprint" | "takeoverStuck" | "retryUnknown">;

/**
 * begin's answer to the record it found (null: none). `reserve`: a new reservation is written,
 * replacing `replaces` (an expired record, or one taken over); `takenOver` is the reservation it
 * took the key from (stuck or unknown), null for an absent or expired record.
 */
export type BeginDecision =
  | { kind: "reserve"; replaces: KeyRecord | null; takenOver: KeyRecord | null }
  | { kind: "replay" | "conflict" | "stuck" | "unknown" | "mismatch" };

/**
 * An expired record is replaced whatever its fingerprint; otherwise other arguments are a mismatch
 * whatever the state. A done key replays; a running one is a conflict; a stuck one is taken over
 * when the tool's policy says so (or its service deduplicates), an unknown one only when its
 * service deduplicates (retryUnknown); otherwise they are reported.
 */
export function decideBegin(existing: KeyRecord | null, request: BeginRequest, nowMs: number): BeginDecision {
  if (existing === null) return { kind: "reserve", replaces: null, takenOver: null };
  const state = stateOf(existing, nowMs);
  if (state === "expired") return { kind: "reserve", replaces: existing, takenOver: null };
  if (existing.fingerprint !== request.fingerprint) return { kind: "mismatch" };
  switch (state) {
    case "done":
      return { kind: "replay" };
    case "inflight":
      return { kind: "conflict" };
    case "unknown":
      return request.retryUnknown ? { kind: "reserve", replaces: existing, takenOver: existing } : { kind: "unknown" };
    case "stuck":
      return request.takeoverStuck || request.retryUnknown ? { kind: "reserve", replaces: existing, takenOver: existing } : { kind: "stuck" };
  }
}

/** Whether begin at `nowMs` with `fingerprint` answers `record` as a replay (what a read before begin may answer alone). */
export function isReplay(record: KeyRecord | null, fingerprint: string, nowMs: number): boolean {
  return decideBegin(record, { fingerprint, takeoverStuck: false, retryUnknown: false }, nowMs).kind === "replay";
}

/** The record a reservation writes under its fencing token. */
export function reservationOf(input: BeginInput, token: number): KeyRecord {
  return {
    scope: input.scope,
    key: input.key,
    tool: input.tool,
    fingerprint: input.fingerprint,
    status: "inflight",
    token,
    createdAtMs: input.nowMs,
    leaseUntilMs: input.nowMs + input.leaseMs,
    completedAtMs: null,
    expiresAtMs: null,
    result: null,
    fallback: input.fallback,
    session: input.session,
    executionId: input.executionId,
    outcomeNote: null,
    unknownAtMs: null,
  };
}

/** The fields a change may set; who made the reservation and for what call never changes. */
export type RecordPatch = Partial<Pick<KeyRecord, "status" | "leaseUntilMs" | "completedAtMs" | "expiresAtMs" | "result" | "executionId" | "outcomeNote" | "unknownAtMs">>;

export function applyPatch(record: KeyRecord, patch: RecordPatch): KeyRecord {
  return { ...record, ...patch };
}

/** Done with a result, from the holder's completion or an operator's resolve: no lease, no unknown outcome left. */
function donePatch(result: StoredResult, ttlMs: number, nowMs: number): RecordPatch {
  return {
    status: "done",
    leaseUntilMs: null,
    completedAtMs: nowMs,
    expiresAtMs: nowMs + ttlMs,
    result,
    outcomeNote: null,
    unknownAtMs: null,
  };
}

/** What the holder of a reservation (its fencing token) does with it. */
export type HolderChange =
  /** stores the result; `executionId`: the execution the record stands for from now on (restoring from the audit log) */
  | { kind: "complete"; result: StoredResult; ttlMs: number; nowMs: number; executionId?: string }
  /** cannot tell whether the side effect happened: the key is held until a probe or an operator decides */
  | { kind: "markUnknown"; note: string; nowMs: number; executionId?: string }
  /** the heartbeat: trusted until then (a stuck reservation nobody took over is inflight again) */
  | { kind: "extendLease"; leaseUntilMs: number }
  /** gives the reservation back: the tool said nothing happened */
  | { kind: "abandon" };

export type HolderRefusal = "stale_token" | "absent";

/**
 * Only the reservation's holder may change it, and only while it is inflight (a stuck one too:
 * nobody else holds its token). An unknown one is refused: its holder already gave up on it.
 * null: allowed.
 */
export function holderRefusal(current: KeyRecord | null, token: number): HolderRefusal | null {
  if (current === null) return "absent";
  return current.status === "inflight" && current.token === token ? null : "stale_token";
}

/** The holder's change as a patch of its record; null: the record is deleted. */
export function holderPatch(change: HolderChange): RecordPatch | null {
  const execution = (id: string | undefined): RecordPatch => (id === undefined ? {} : { executionId: id });
  switch (change.kind) {
    case "complete":
      return { ...donePatch(change.result, change.ttlMs, change.nowMs), ...execution(change.executionId) };
    case "markUnknown":
      // the lease stays: when the call's lease ended
      return { status: "unknown", outcomeNote: change.note, unknownAtMs: change.nowMs, ...execution(change.executionId) };
    case "extendLease":
      return { leaseUntilMs: change.leaseUntilMs };
    case "abandon":
      return null;
  }
}

/** An operator's decision about a held key. */
export type OperatorChange = { kind: "release" } | { kind: "resolve"; result: StoredResult; ttlMs: number };

/**
 * An operator may release or resolve a stuck or unknown record, and an inflight one within its
 * lease only when forced (its call may still complete); with a token, only the reservation holding
 * it (the call the decision is about). A done or expired record is not_inflight whatever the token.
 * null: allowed.
 */
export function operatorRefusal(current: KeyRecord | null, guard: OperatorGuard): OperatorRefusal | null {
  if (current === null) return "absent";
  if (current.status === "done") return "not_inflight";
  if (guard.token !== undefined && current.token !== guard.token) return "changed";
  if (current.status === "inflight" && !guard.force && (current.leaseUntilMs ?? 0) > guard.nowMs) return "running";
  return null;
}

/** The operator's decision as a patch of the record; null: the record is deleted (released). */
export function operatorPatch(change: OperatorChange, nowMs: number): RecordPatch | null {
  return change.kind === "release" ? null : donePatch(change.result, change.ttlMs, nowMs);
}

/**
 * The time a record's state is read against, as lists order and count it: the lease while
 * inflight (stuck once it passed), the expiry once done (expired once it passed); an unknown
 * record is held whatever the time, and is ordered by when its outcome became unknown.
 */
export function deadlineOf(record: Pick<KeyRecord, "status" | "leaseUntilMs" | "unknownAtMs" | "expiresAtMs">): number {
  if (record.status === "inflight") return record.leaseUntilMs ?? Number.POSITIVE_INFINITY;
  if (record.status === "unknown") return record.unknownAtMs ?? 0;
  return record.expiresAtMs ?? Number.POSITIVE_INFINITY;
}

/** Only done records are ever purged, once their result expired before `olderThanMs`; a held key stays whatever its age. */
export function isPurgeable(record: KeyRecord, olderThanMs: number): boolean {
  return record.status === "done" && record.expiresAtMs !== null && record.expiresAtMs < olderThanMs;
}

/*
 * The same rules over the audit log's view of a key (its latest execution), which decides when the
 * key store lost the record.
 */

/** Outcomes after which another execution of the key may run: its call applied nothing. */
export function appliedNothing(outcome: PriorExecution["outcome"]): boolean {
  return outcome === "failed" || outcome === "released" || outcome === "retried";
}

/**
 * Whether a call arriving at `arrivedAtMs` may run after the key's latest execution: that one
 * applied nothing, or its result had expired by then (an expired key runs as new). One still open,
 * held unknown, or whose result still stands would make this call the action's second run.
 */
export function mayRunAfter(latest: PriorExecution, arrivedAtMs: number): boolean {
  if (appliedNothing(latest.outcome)) return true;
  if (latest.outcome === null || latest.outcome === "unknown") return false;
  return latest.expiresAt !== null && latest.expiresAt.getTime() <= arrivedAtMs;
}

/**
 * An execution whose result the log keeps for replay at `nowMs`: succeeded, final_error,
 * late_completion (as the key's latest execution) or resolved, with its body, not expired.
 */
export function keepsResult(prior: PriorExecution, nowMs: number): boolean {
  if (prior.outcome === null || prior.outcome === "unknown" || appliedNothing(prior.outcome)) return false;
  return prior.resultBody !== null && prior.expiresAt !== null && prior.expiresAt.getTime() > nowMs;
}

/**
 * An execution that holds its key whatever became of the key store: its outcome was unknown, or it
 * never reported one and its lease has passed (one within its lease may still complete by itself).
 */
export function heldOpen(prior: PriorExecution, nowMs: number): boolean {
  return prior.outcome === "unknown" || (prior.outcome === null && prior.leaseUntil.getTime() <= nowMs);
}
