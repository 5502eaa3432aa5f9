/** What a key store keeps under one (scope, key). Times are epoch milliseconds. */
export type StoredStatus = "inflight" | "done";

/** The state an operator or a caller sees: stuck and expired are derived from the deadlines on read. */
export type KeyState = "inflight" | "stuck" | "done" | "expired";

export const KEY_STATES: readonly KeyState[] = ["inflight", "stuck", "done", "expired"];

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
  /** set while inflight */
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
}

export function stateOf(record: Pick<KeyRecord, "status" | "leaseUntilMs" | "expiresAtMs">, nowMs: number): KeyState {
  if (record.status === "inflight") {
    return record.leaseUntilMs !== null && record.leaseUntilMs <= nowMs ? "stuck" : "inflight";
  }
  return record.expiresAtMs !== null && record.expiresAtMs <= nowMs ? "expired" : "done";
}
