import { STORED_STATUSES, type KeyRecord, type StoredResult, type StoredStatus } from "@/lib/idempotency/record";
import { UnexpectedRedisReplyError } from "./errors";

/**
 * Record hash fields. Every value is a string; a null value is an absent field. Times are epoch
 * milliseconds as decimal integers; the token is a decimal integer below 2^53.
 */
export const RECORD_FIELDS = [
  "scope",
  "key",
  "tool",
  "fingerprint",
  "status",
  "token",
  "createdAtMs",
  "leaseUntilMs",
  "completedAtMs",
  "expiresAtMs",
  "fallback",
  "session",
  "executionId",
  "outcomeNote",
  "unknownAtMs",
] as const;

/** Fields read for list rows: everything but the result. */
export const LIST_FIELDS: readonly string[] = RECORD_FIELDS;

type Hash = Record<string, string | undefined>;

export function pairsToHash(pairs: readonly unknown[]): Hash {
  const hash: Hash = {};
  for (let i = 0; i + 1 < pairs.length; i += 2) hash[String(pairs[i])] = String(pairs[i + 1]);
  return hash;
}

const isStoredStatus = (value: string | undefined): value is StoredStatus =>
  value !== undefined && (STORED_STATUSES as readonly string[]).includes(value);

const num = (value: string | undefined): number | null => (value === undefined || value === "" ? null : Number(value));

export function hashToRecord(hash: Hash, withResult: boolean): KeyRecord {
  const { scope, key, tool, fingerprint, status, token, createdAtMs } = hash;
  if (
    scope === undefined || key === undefined || tool === undefined || fingerprint === undefined ||
    !isStoredStatus(status) || token === undefined || createdAtMs === undefined
  ) {
    throw new UnexpectedRedisReplyError("record hash", hash);
  }
  let result: StoredResult | null = null;
  if (withResult && hash.resultStatus !== undefined && hash.resultBody !== undefined) {
    result = { status: Number(hash.resultStatus), body: hash.resultBody, final: hash.resultFinal === "1" };
  }
  return {
    scope,
    key,
    tool,
    fingerprint,
    status,
    token: Number(token),
    createdAtMs: Number(createdAtMs),
    leaseUntilMs: num(hash.leaseUntilMs),
    completedAtMs: num(hash.completedAtMs),
    expiresAtMs: num(hash.expiresAtMs),
    result,
    fallback: hash.fallback === "1",
    session: hash.session ?? null,
    executionId: hash.executionId ?? null,
    outcomeNote: hash.outcomeNote ?? null,
    unknownAtMs: num(hash.unknownAtMs),
  };
}

/** A script's HGETALL pairs, or null for the empty answer of an absent record. */
export function pairsToRecord(pairs: readonly unknown[] | undefined): KeyRecord | null {
  if (!Array.isArray(pairs) || pairs.length === 0) return null;
  return hashToRecord(pairsToHash(pairs), true);
}

/** HMGET of LIST_FIELDS: a list row (result left out), or null when the record is gone. */
export function listRowToRecord(values: readonly (string | null)[]): KeyRecord | null {
  if (values[0] === null || values[0] === undefined) return null;
  const hash: Hash = {};
  LIST_FIELDS.forEach((field, i) => {
    const value = values[i];
    if (value !== null && value !== undefined) hash[field] = value;
  });
  return hashToRecord(hash, false);
}

export function resultArgs(result: StoredResult): [status: string, body: string, final: string] {
  return [String(result.status), result.body, result.final ? "1" : "0"];
}
