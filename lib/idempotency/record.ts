/**
 * What a key store keeps under one (scope, key). Times are epoch milliseconds.
 * `unknown`: the call ended without knowing whether its side effect happened (a timeout, a 5xx, an
 * exception after the request left); the key stays held until a probe or an operator decides.
 */
export type StoredStatus = "inflight" | "unknown" | "done";

export const STORED_STATUSES: readonly StoredStatus[] = ["inflight", "unknown", "done"];

/** The state an operator or a caller sees: stuck and expired are derived from the deadlines on read. */
export type KeyState = "inflight" | "stuck" | "unknown" | "done" | "expired";

export const KEY_STATES: readonly KeyState[] = ["inflight", "stuck", "unknown", "done", "expired"];

/** A result as it is replayed: HTTP-like status and the exact body bytes (JSON text). */
export interface StoredResult {
  status: number;
  body: string;
  /** a final error (e.g. card declined): stored and replayed like a success */
  final: boolean;
}

export interface KeyRecord {
  scope: string;
  key: string;
  tool: string;
  fingerprint: string;
  status: StoredStatus;
  /** fencing token of the reservation that wrote this record */
  token: number;
  createdAtMs: number;
  /** set while inflight (and kept while unknown: when the call's lease ended) */
  leaseUntilMs: number | null;
  completedAtMs: number | null;
  /** set once done */
  expiresAtMs: number | null;
  /** null in list rows (payloads stay out of lists) and while inflight */
  result: StoredResult | null;
  fallback: boolean;
  session: string | null;
  /** the audit log's execution that reserved (and, once done, completed) this key */
  executionId: string | null;
  /** unknown records: why the outcome is unknown ("timed out after 400 ms", "the service answered 502") */
  outcomeNote: string | null;
  /** unknown records: when the outcome became unknown */
  unknownAtMs: number | null;
}

export function stateOf(record: Pick<KeyRecord, "status" | "leaseUntilMs" | "expiresAtMs">, nowMs: number): KeyState {
  if (record.status === "unknown") return "unknown";
  if (record.status === "inflight") {
    return record.leaseUntilMs !== null && record.leaseUntilMs <= nowMs ? "stuck" : "inflight";
  }
  return record.expiresAtMs !== null && record.expiresAtMs <= nowMs ? "expired" : "done";
}
