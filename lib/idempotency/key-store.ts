import type { KeyRecord, KeyState, StoredResult } from "@/lib/idempotency/record";
import type { ResultBytesCounter } from "./scope-result-limit";

export interface BeginInput {
  scope: string;
  key: string;
  tool: string;
  fingerprint: string;
  leaseMs: number;
  nowMs: number;
  fallback: boolean;
  session: string | null;
  executionId: string;
  /** a stuck reservation is taken over with a new token instead of being reported */
  takeoverStuck: boolean;
  /**
   * an unknown (and a stuck) reservation with the same fingerprint is taken over with a new token
   * instead of being reported: the tool's service deduplicates on the forwarded key itself, so
   * sending the call again cannot apply it twice
   */
  retryUnknown: boolean;
}

/**
 * The one atomic step before a side effect. Exactly one of any set of racing callers with the same
 * (scope, key) gets `reserved`; the others get the answer matching the record they found.
 * `mismatch` wins over the state: a key reused with other arguments is an error whatever its state.
 */
export type BeginOutcome =
  | {
      kind: "reserved";
      token: number;
      record: KeyRecord;
      takenOver: KeyRecord | null;
      /**
       * Since when this part of the store has held data, for stores that can lose it (Redis without
       * persistence, a flush, a failover): a record older than that may be missing, so the engine
       * consults the audit log for this key. null for durable stores.
       */
      storeEpochMs: number | null;
    }
  | { kind: "replay"; record: KeyRecord }
  | { kind: "conflict"; record: KeyRecord }
  | { kind: "stuck"; record: KeyRecord }
  /** the key's last call ended with an unknown outcome: held until a probe or an operator decides */
  | { kind: "unknown"; record: KeyRecord }
  | { kind: "mismatch"; record: KeyRecord };

export interface CompleteOptions {
  /**
   * record this execution as the one the record stands for (restoring a result or an unknown
   * outcome from the audit log: the record is that earlier execution's, not the reserving call's)
   */
  executionId?: string;
}

export type CompleteOutcome =
  | { ok: true; record: KeyRecord }
  /** the reservation is gone or belongs to another token: the caller is a stale holder */
  | { ok: false; reason: "stale_token" | "absent"; current: KeyRecord | null };

/**
 * An operator's release or resolve: only stuck and unknown records change, and inflight ones whose
 * lease is still valid when forced (their call may still complete). `not_inflight`: done or expired;
 * `running`: inflight within its lease and not forced; `changed`: another reservation than the
 * guard's token holds the key.
 */
export type OperatorOutcome =
  | { ok: true; before: KeyRecord; after: KeyRecord | null }
  | { ok: false; reason: OperatorRefusal; current: KeyRecord | null };

/** `changed`: the key is held by another reservation than the one the decision was made about. */
export type OperatorRefusal = "absent" | "not_inflight" | "running" | "changed";

export interface OperatorGuard {
  nowMs: number;
  /** also act on an inflight record whose lease is still valid */
  force?: boolean;
  /**
   * act only on the reservation with this fencing token: the one whose call the decision is about
   * (a probe's answer, a page an operator read). A key taken since by another call is refused
   * (`changed`), so a decision about one call never frees or resolves another's.
   */
  token?: number;
}

export interface ListQuery {
  state?: KeyState;
  tool?: string;
  scope?: string;
  /** key prefix, matched case-sensitively */
  prefix?: string;
  limit: number;
  /**
   * from a previous page's nextCursor with the same filters. A store's cursor is a raw position
   * (it may name a record of another scope); it leaves the server only sealed (lib/operator/list-cursor.ts).
   */
  cursor?: string | null;
  nowMs: number;
}

export interface ListPage {
  /** newest first; `result` is always null here */
  items: KeyRecord[];
  nextCursor: string | null;
}

export type StateCounts = Record<KeyState, number>;

export interface KeyStore {
  /** memory: lib/store/memory, the rules in one process (tests, a reference for the other stores) */
  readonly kind: "redis" | "postgres" | "pglite" | "memory";
  /** each scope's stored result bytes, which its limit is checked against (lib/idempotency/scope-result-limit.ts) */
  readonly resultBytes?: ResultBytesCounter;
  begin(input: BeginInput): Promise<BeginOutcome>;
  /**
   * Optional, for a store where a read costs less than begin: the record of (scope, key) when
   * begin at `nowMs` with `fingerprint` would answer it as a replay (done, the same fingerprint,
   * not expired), else null. A read only: it reserves and changes nothing, so a null is no answer
   * (begin decides).
   */
  peekReplay?(scope: string, key: string, fingerprint: string, nowMs: number): Promise<KeyRecord | null>;
  /** stores the result; refused unless the record is inflight under `token` */
  complete(
    scope: string,
    key: string,
    token: number,
    result: StoredResult,
    ttlMs: number,
    nowMs: number,
    options?: CompleteOptions,
  ): Promise<CompleteOutcome>;
  /** the holder gives its reservation back (the tool said nothing happened); refused for another token */
  abandon(scope: string, key: string, token: number): Promise<boolean>;
  /**
   * the holder cannot tell whether its side effect happened: the inflight record under `token`
   * becomes `unknown` (with `note` and `unknownAtMs = nowMs`) and blocks the key until a probe or an
   * operator decides; refused (stale_token / absent) like complete
   */
  markUnknown(scope: string, key: string, token: number, note: string, nowMs: number, options?: CompleteOptions): Promise<CompleteOutcome>;
  /**
   * the holder's heartbeat: the inflight record under `token` is trusted until `leaseUntilMs` (a
   * stuck one, which nobody took over, is inflight again); refused (stale_token / absent) like complete
   */
  extendLease(scope: string, key: string, token: number, leaseUntilMs: number): Promise<CompleteOutcome>;
  /** operator: delete a stuck or unknown reservation (an inflight one only when forced) */
  release(scope: string, key: string, guard: OperatorGuard): Promise<OperatorOutcome>;
  /** operator: mark a stuck or unknown reservation done with the given result (an inflight one only when forced) */
  resolve(scope: string, key: string, result: StoredResult, ttlMs: number, guard: OperatorGuard): Promise<OperatorOutcome>;
  get(scope: string, key: string): Promise<KeyRecord | null>;
  /**
   * Optional, for stores that can lose data (see BeginOutcome.storeEpochMs): since when the part of
   * the store that holds (scope, key) has held data; null when it holds none now (lost, or never
   * written: the next reservation there starts a new epoch). Stores without it are durable.
   */
  epochOf?(scope: string, key: string): Promise<number | null>;
  list(query: ListQuery): Promise<ListPage>;
  counts(nowMs: number, filter?: { tool?: string; scope?: string }): Promise<StateCounts>;
  /** deletes records expired before `olderThanMs`; returns how many */
  purge(olderThanMs: number, batch?: number): Promise<number>;
  /**
   * Resolves true as soon as the record of (scope, key) may have changed — completed, marked unknown,
   * abandoned, released, resolved, replaced — by any process using the same store; false after
   * timeoutMs or when `signal` aborts. Never rejects (a broken feed just waits out the timeout, the
   * caller re-reads the store). No busy loop on the store.
   *
   * For a caller that saw the record inflight: once the store listens for the key it reads the
   * record's status once, and a record that is no longer inflight (done, unknown, gone) counts as
   * changed, so a change between the caller's read and the start of the wait is not missed. A purge
   * of expired records need not be announced (no call waits on a done record). Spurious wakes are
   * possible (the caller re-reads anyway).
   */
  waitForChange(scope: string, key: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean>;
  ping(): Promise<void>;
  close(): Promise<void>;
}
