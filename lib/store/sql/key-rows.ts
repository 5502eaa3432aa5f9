import { Prisma } from "@/generated/prisma/client";
import type { BeginInput } from "@/lib/idempotency/key-store";
import { STORED_STATUSES, type KeyRecord, type StoredResult, type StoredStatus } from "@/lib/idempotency/record";
import { deadlineOf, reservationOf, type RecordPatch } from "@/lib/idempotency/transitions";

/**
 * A key's record as a row of `idempotency_keys` and back, and the parts of the statements that
 * write the rules' records (transitions.ts) as rows.
 */

/** A row as PostgreSQL returns it; int8 columns may arrive as bigint, number or string by adapter. */
export interface Row {
  scope: string;
  key: string;
  tool: string;
  fingerprint: string;
  status: string;
  token: bigint | number | string;
  created_at_ms: bigint | number | string;
  lease_until_ms: bigint | number | string | null;
  completed_at_ms: bigint | number | string | null;
  expires_at_ms: bigint | number | string | null;
  result_status?: number | null;
  result_body?: string | null;
  final: boolean;
  fallback: boolean;
  session: string | null;
  execution_id: string | null;
  outcome_note: string | null;
  unknown_at_ms: bigint | number | string | null;
}

export const RECORD_COLUMNS = [
  "scope",
  "key",
  "tool",
  "fingerprint",
  "status",
  "token",
  "created_at_ms",
  "lease_until_ms",
  "completed_at_ms",
  "expires_at_ms",
  "result_status",
  "result_body",
  "final",
  "fallback",
  "session",
  "execution_id",
  "outcome_note",
  "unknown_at_ms",
] as const;

export const ALL = Prisma.raw(RECORD_COLUMNS.join(", "));
/** list rows leave the payload out */
export const LIST_COLUMNS = RECORD_COLUMNS.filter((c) => c !== "result_body" && c !== "result_status");
export const LIST = Prisma.raw(LIST_COLUMNS.join(", "));

export const columnsOf = (alias: string, prefix = "", columns: readonly string[] = RECORD_COLUMNS) =>
  Prisma.raw(columns.map((c) => `${alias}.${c}${prefix ? ` AS ${prefix}${c}` : ""}`).join(", "));


export function num(v: bigint | number | string): number {
  return typeof v === "number" ? v : Number(v);
}

export function numOrNull(v: bigint | number | string | null | undefined): number | null {
  return v === null || v === undefined ? null : num(v);
}

export function storedStatus(value: string): StoredStatus {
  if ((STORED_STATUSES as readonly string[]).includes(value)) return value as StoredStatus;
  throw new Error(`idempotency_keys holds an unrecognised status ${JSON.stringify(value)}`);
}

export function toRecord(row: Row, withResult: boolean): KeyRecord {
  const status = storedStatus(row.status);
  const result: StoredResult | null =
    withResult && status === "done" && row.result_status !== null && row.result_status !== undefined
      ? { status: Number(row.result_status), body: row.result_body ?? "", final: row.final }
      : null;
  return {
    scope: row.scope,
    key: row.key,
    tool: row.tool,
    fingerprint: row.fingerprint,
    status,
    token: num(row.token),
    createdAtMs: num(row.created_at_ms),
    leaseUntilMs: numOrNull(row.lease_until_ms),
    completedAtMs: numOrNull(row.completed_at_ms),
    expiresAtMs: numOrNull(row.expires_at_ms),
    result,
    fallback: row.fallback,
    session: row.session,
    executionId: row.execution_id,
    outcomeNote: row.outcome_note ?? null,
    unknownAtMs: numOrNull(row.unknown_at_ms),
  };
}

/** Picks the `p_`-prefixed columns of a joined row back out as a record row. */
export function prefixed(row: Record<string, unknown>, prefix: string): Row | null {
  if (row[`${prefix}scope`] === null || row[`${prefix}scope`] === undefined) return null;
  const out: Record<string, unknown> = {};
  for (const c of RECORD_COLUMNS) out[c] = row[`${prefix}${c}`];
  return out as unknown as Row;
}

export const ms = (v: number) => BigInt(Math.trunc(v));

/**
 * The values of a new reservation's row (the rules' reservationOf), from `tool` to `unknown_at_ms`
 * in the order of RECORD_COLUMNS; its token is `token` (by default the next of the sequence).
 */
export function reservationValues(input: BeginInput, token: Prisma.Sql = Prisma.sql`nextval('idempotency_token_seq')`): Prisma.Sql {
  const r = reservationOf(input, 0);
  return Prisma.sql`${r.tool}::text, ${r.fingerprint}::text, ${r.status}::text, ${token}, ${ms(r.createdAtMs)}::bigint,
    ${ms(r.leaseUntilMs!)}::bigint, NULL::bigint, NULL::bigint, ${ms(deadlineOf(r))}::bigint, NULL::integer, NULL::text, false,
    ${r.fallback}::boolean, ${r.session}::text, ${r.executionId}::text, NULL::text, NULL::bigint`;
}

/**
 * The SET list of a change the rules made (holderPatch, operatorPatch), deadline_ms included: the
 * changed record's deadlineOf. A patch without a status (a heartbeat) changes an inflight record.
 */
export function patchAssignments(patch: RecordPatch): Prisma.Sql {
  const bigintOrNull = (v: number | null) => (v === null ? Prisma.sql`NULL::bigint` : Prisma.sql`${ms(v)}::bigint`);
  const set: Prisma.Sql[] = [];
  if (patch.status !== undefined) set.push(Prisma.sql`status = ${patch.status}::text`);
  if (patch.leaseUntilMs !== undefined) set.push(Prisma.sql`lease_until_ms = ${bigintOrNull(patch.leaseUntilMs)}`);
  if (patch.completedAtMs !== undefined) set.push(Prisma.sql`completed_at_ms = ${bigintOrNull(patch.completedAtMs)}`);
  if (patch.expiresAtMs !== undefined) set.push(Prisma.sql`expires_at_ms = ${bigintOrNull(patch.expiresAtMs)}`);
  if (patch.unknownAtMs !== undefined) set.push(Prisma.sql`unknown_at_ms = ${bigintOrNull(patch.unknownAtMs)}`);
  if (patch.outcomeNote !== undefined) set.push(Prisma.sql`outcome_note = ${patch.outcomeNote}::text`);
  if (patch.executionId !== undefined) set.push(Prisma.sql`execution_id = ${patch.executionId}::text`);
  if (patch.result !== undefined) set.push(resultAssignments(patch.result));
  const deadline = deadlineOf({ status: "inflight", leaseUntilMs: null, unknownAtMs: null, expiresAtMs: null, ...patch });
  set.push(Prisma.sql`deadline_ms = ${ms(deadline)}::bigint`);
  return Prisma.join(set, ", ");
}

function resultAssignments(result: StoredResult | null): Prisma.Sql {
  if (result === null) return Prisma.sql`result_status = NULL, result_body = NULL, final = false`;
  return Prisma.sql`result_status = ${Math.trunc(result.status)}::integer, result_body = ${result.body}::text, final = ${result.final}::boolean`;
}

/**
 * The row of `record`'s key while it is still that version of it: the same reservation (tokens
 * are never reused) in the same status and lease (a heartbeat changes only the lease). `table`:
 * how the statement names the row.
 */
export function sameVersion(record: KeyRecord, table = "idempotency_keys"): Prisma.Sql {
  const t = Prisma.raw(table);
  const lease = record.leaseUntilMs === null ? Prisma.sql`NULL::bigint` : Prisma.sql`${ms(record.leaseUntilMs)}::bigint`;
  return Prisma.sql`${t}.scope = ${record.scope}::text AND ${t}.key = ${record.key}::text AND ${t}.token = ${BigInt(record.token)}::bigint
    AND ${t}.status = ${record.status}::text AND ${t}.lease_until_ms IS NOT DISTINCT FROM ${lease}`;
}

/** begin's answer for a row it wrote: PostgreSQL keeps what it committed, nothing to recover from the audit log. */
export function reserved(record: KeyRecord, takenOver: KeyRecord | null): { kind: "reserved"; token: number; record: KeyRecord; takenOver: KeyRecord | null; storeEpochMs: null } {
  return { kind: "reserved", token: record.token, record, takenOver, storeEpochMs: null };
}
