import { randomUUID } from "node:crypto";
import { Prisma, type OperatorAction, type PrismaClient } from "@/generated/prisma/client";
import type { AuditTrailFilters } from "./audit-trail-filters";
import { newestFirstPageSql } from "@/lib/db/newest-first-page";
import { InvalidArgumentsError } from "@/lib/idempotency/errors";
import type { KeyRecord } from "@/lib/idempotency/record";
import { stateOf } from "@/lib/idempotency/record";

export const MAX_REASON_LENGTH = 1_000;

/** Every operator action needs a reason: the audit trail records it with the actor. */
export function requireReason(reason: unknown): string {
  const text = typeof reason === "string" ? reason.trim() : "";
  if (text.length < 3) throw new InvalidArgumentsError("a reason is required (at least 3 characters)", [{ path: "reason", message: "required" }]);
  if (text.length > MAX_REASON_LENGTH) throw new InvalidArgumentsError(`the reason is longer than ${MAX_REASON_LENGTH} characters`, [{ path: "reason", message: "too long" }]);
  return text;
}

export interface OperatorActionInput {
  actor: string;
  action: string;
  reason: string;
  scope?: string | null;
  key?: string | null;
  anomalyId?: string | null;
  before?: unknown;
  after?: unknown;
}

/** A record as the trail keeps it: its state at that moment, payloads left out. */
export function recordSnapshot(record: KeyRecord | null, nowMs = Date.now()): Prisma.InputJsonValue | null {
  if (!record) return null;
  return {
    state: stateOf(record, nowMs),
    tool: record.tool,
    token: record.token,
    fingerprint: record.fingerprint,
    leaseUntilMs: record.leaseUntilMs,
    expiresAtMs: record.expiresAtMs,
    resultStatus: record.result?.status ?? null,
  };
}

/** Writes one row of the operator audit trail; `prisma` may be a transaction's client, to commit it with the action. */
export async function recordOperatorAction(prisma: Pick<PrismaClient, "operatorAction">, input: OperatorActionInput): Promise<string> {
  const id = randomUUID();
  await prisma.operatorAction.create({
    data: {
      id,
      actor: input.actor,
      action: input.action,
      reason: input.reason,
      scope: input.scope ?? null,
      key: input.key ?? null,
      anomalyId: input.anomalyId ?? null,
      stateBefore: (input.before ?? undefined) as Prisma.InputJsonValue | undefined,
      stateAfter: (input.after ?? undefined) as Prisma.InputJsonValue | undefined,
      at: new Date(),
    },
  });
  return id;
}

export interface OperatorActionQuery extends AuditTrailFilters {
  limit: number;
  cursor?: string | null;
}

const COLUMNS = Prisma.sql`id, actor, action, scope, key, anomaly_id AS "anomalyId", reason,
  state_before AS "stateBefore", state_after AS "stateAfter", at`;

/**
 * The page query, exposed so tests can EXPLAIN exactly what runs. Newest first, ties by id; the
 * cursor (the last row's id) becomes a bound on `at`, so each filter's (…, at) index serves it.
 */
export function operatorActionsSql(q: OperatorActionQuery): Prisma.Sql {
  return newestFirstPageSql({
    table: "operator_actions",
    timeColumn: "at",
    columns: COLUMNS,
    equals: { actor: q.actor, action: q.action, scope: q.scope, key: q.key },
    from: q.from,
    to: q.to,
    // what the action touched: a key, a tenant's scope, or an anomaly
    where: q.target ? [Prisma.sql`(key = ${q.target} OR scope = ${q.target} OR anomaly_id = ${q.target})`] : [],
    cursor: q.cursor,
    limit: q.limit,
  });
}

/** Newest first, with a cursor (the last row's id). */
export async function listOperatorActions(prisma: PrismaClient, q: OperatorActionQuery) {
  const rows = await prisma.$queryRaw<OperatorAction[]>(operatorActionsSql(q));
  const items = rows.slice(0, q.limit);
  return { items, nextCursor: rows.length > q.limit ? items[items.length - 1].id : null };
}

/** How many operator actions the audit trail holds about one key (at most `cap`, to stay cheap). */
export async function countKeyOperatorActions(prisma: PrismaClient, scope: string, key: string, cap = 100): Promise<number> {
  const rows = await prisma.operatorAction.findMany({ where: { scope, key }, select: { id: true }, take: cap });
  return rows.length;
}
