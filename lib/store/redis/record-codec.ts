import type { KeyRecord, StoredResult, StoredStatus } from "@/lib/idempotency/record";
import { UnexpectedRedisReplyError } from "./errors";
import { escapeField, unescapeField } from "./key-names";

/**
 * A record is one Redis string (not a hash): the encoding version, then fixed-order fields joined
 * by "\n", the result body last, raw. Scope and key are not repeated: they are in the record's key
 * name and in every index member. The Lua include `scripts/includes/record.lua` reads and writes
 * the same layout (RECORD_FIELDS there); change both together.
 *
 *   2 \n status(i|u|d) \n token \n createdAtMs \n leaseUntilMs \n completedAtMs \n expiresAtMs \n
 *   unknownAtMs \n fallback(0|1) \n tool \n fingerprint \n executionId \n session \n outcomeNote \n
 *   resultStatus \n resultFinal(0|1) \n resultBody
 *
 * An absent number or result field is empty. Session and outcome note are "" when absent and
 * "=" + text when present (so an empty string survives). Text fields are escaped (escapeField:
 * "%" and "\n" percent-encoded) by the caller before they reach a script; the scripts never look
 * inside them except to compare fingerprints and to name a tool's index, which use the same
 * escaped form. A done record without its body takes about 200 bytes, where the hash of the
 * earlier versions took over 1 kB (a hash holding a body over 64 bytes loses its compact encoding).
 */
export const RECORD_VERSION = "2";

const STATUS_OF: Record<string, StoredStatus> = { i: "inflight", u: "unknown", d: "done" };
/** fields after the version, before the body */
const FIELD_COUNT = 16;

const num = (value: string): number | null => (value === "" ? null : Number(value));
const optional = (value: string): string | null => (value === "" ? null : unescapeField(value.slice(1)));

/** An optional text field as a script argument: "" for null, "=" + escaped text otherwise. */
export function optionalArg(value: string | null): string {
  return value === null ? "" : `=${escapeField(value)}`;
}

/**
 * The record stored under (scope, key), or null for an absent one (a nil or empty reply).
 * `withResult: false` leaves the result out (list rows).
 */
export function decodeRecord(scope: string, key: string, value: string | null | undefined, withResult = true): KeyRecord | null {
  if (value === null || value === undefined || value === "") return null;
  const f = new Array<string>(FIELD_COUNT);
  let pos = 0;
  for (let i = 0; i < FIELD_COUNT; i++) {
    const nl = value.indexOf("\n", pos);
    if (nl === -1) throw new UnexpectedRedisReplyError("record value", value);
    f[i] = value.slice(pos, nl);
    pos = nl + 1;
  }
  const [version, status, token, createdAtMs, leaseUntilMs, completedAtMs, expiresAtMs, unknownAtMs, fallback, tool, fingerprint, executionId, session, outcomeNote, resultStatus, resultFinal] = f;
  const stored = STATUS_OF[status];
  if (version !== RECORD_VERSION || stored === undefined) throw new UnexpectedRedisReplyError("record value", value);
  let result: StoredResult | null = null;
  if (withResult && resultStatus !== "") result = { status: Number(resultStatus), body: value.slice(pos), final: resultFinal === "1" };
  return {
    scope,
    key,
    tool: unescapeField(tool),
    fingerprint: unescapeField(fingerprint),
    status: stored,
    token: Number(token),
    createdAtMs: Number(createdAtMs),
    leaseUntilMs: num(leaseUntilMs),
    completedAtMs: num(completedAtMs),
    expiresAtMs: num(expiresAtMs),
    result,
    fallback: fallback === "1",
    session: optional(session),
    executionId: executionId === "" ? null : unescapeField(executionId),
    outcomeNote: optional(outcomeNote),
    unknownAtMs: num(unknownAtMs),
  };
}

/** The stored status of a record value without decoding it (the letter after "2\n"). */
export function statusOfValue(value: string | null): StoredStatus | null {
  if (value === null || value === "") return null;
  return STATUS_OF[value[2]] ?? null;
}

export function resultArgs(result: StoredResult): [status: string, body: string, final: string] {
  return [String(result.status), result.body, result.final ? "1" : "0"];
}

const LETTER_OF: Record<StoredStatus, string> = { inflight: "i", unknown: "u", done: "d" };
const text = (n: number | null): string => (n === null ? "" : String(n));

/** The value the scripts would store for this record (seeding, tests); the inverse of decodeRecord. */
export function encodeRecord(record: Omit<KeyRecord, "scope" | "key">): string {
  const r = record.result;
  return [
    RECORD_VERSION,
    LETTER_OF[record.status],
    String(record.token),
    String(record.createdAtMs),
    text(record.leaseUntilMs),
    text(record.completedAtMs),
    text(record.expiresAtMs),
    text(record.unknownAtMs),
    record.fallback ? "1" : "0",
    escapeField(record.tool),
    escapeField(record.fingerprint),
    record.executionId === null ? "" : escapeField(record.executionId),
    optionalArg(record.session),
    optionalArg(record.outcomeNote),
    r === null ? "" : String(r.status),
    r === null ? "" : r.final ? "1" : "0",
    r === null ? "" : r.body,
  ].join("\n");
}
