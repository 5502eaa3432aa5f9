import { Prisma, type Anomaly, type PrismaClient } from "@/generated/prisma/client";
import { recordOperatorAction, requireReason } from "@/lib/audit/operator-actions";
import { newestFirstPageSql } from "@/lib/db/newest-first-page";
import { InvalidStateError, NotFoundError } from "@/lib/idempotency/errors";
import { redactValue } from "@/lib/idempotency/redaction";
import { anomalyArguments } from "./anomaly-arguments";

export const ANOMALY_STATUSES = ["open", "acknowledged", "resolved"] as const;
export type AnomalyStatus = (typeof ANOMALY_STATUSES)[number];

export interface AnomalyQuery {
  status?: AnomalyStatus;
  type?: string;
  tool?: string;
  limit: number;
  cursor?: string | null;
}

const COLUMNS = Prisma.sql`id, type, dedupe_key AS "dedupeKey", tool, scope, key, status, summary, evidence,
  detected_at AS "detectedAt", updated_at AS "updatedAt"`;

/**
 * The page query, exposed so tests can EXPLAIN exactly what runs. Newest first, ties by id; the
 * cursor (the last row's id) becomes a bound on detected_at, so the (status, detected_at) and
 * (detected_at) indexes serve every page.
 */
export function anomaliesSql(q: AnomalyQuery): Prisma.Sql {
  return newestFirstPageSql({
    table: "anomalies",
    timeColumn: "detected_at",
    columns: COLUMNS,
    equals: { status: q.status, type: q.type, tool: q.tool },
    cursor: q.cursor,
    limit: q.limit,
  });
}

/** Newest first, cursor = the last row's id. */
export async function listAnomalies(prisma: PrismaClient, q: AnomalyQuery) {
  const rows = await prisma.$queryRaw<Anomaly[]>(anomaliesSql(q));
  const items = rows.slice(0, q.limit);
  return { items, nextCursor: rows.length > q.limit ? items[items.length - 1].id : null };
}

/** exposed for EXPLAIN in tests */
export const openAnomalyCountsSql = Prisma.sql`SELECT type, count(*)::int AS n FROM anomalies WHERE status = 'open' GROUP BY type`;

export async function countOpenAnomalies(prisma: PrismaClient): Promise<Record<string, number>> {
  const rows = await prisma.$queryRaw<{ type: string; n: number }[]>(openAnomalyCountsSql);
  return Object.fromEntries(rows.map((r) => [r.type, r.n]));
}

/**
 * Of these keys (under which calls to these tools ran), the ones the reconciler flagged as
 * fresh-key duplicates since a time, any status: a range on the (tool, type, detected_at) index
 * per tool.
 */
export async function flaggedFreshKeyDuplicates(prisma: PrismaClient, input: { tools: readonly string[]; keys: readonly string[]; since: Date }): Promise<Set<string>> {
  if (input.keys.length === 0) return new Set();
  const rows = await prisma.anomaly.findMany({
    where: { type: "fresh_key_duplicate", tool: { in: [...new Set(input.tools)] }, detectedAt: { gte: input.since }, key: { in: [...new Set(input.keys)] } },
    select: { key: true },
  });
  return new Set(rows.map((r) => r.key!));
}

/** One anomaly, with the kept arguments of the executions its evidence names. */
export async function getAnomaly(prisma: PrismaClient, id: string) {
  const row = await prisma.anomaly.findUnique({ where: { id } });
  if (!row) throw new NotFoundError(`no anomaly ${id}`);
  // evidence quotes results and answers: shown without the secrets they may hold
  return { ...row, evidence: redactValue(row.evidence) as typeof row.evidence, arguments: await anomalyArguments(prisma, row) };
}

const ALLOWED: Record<AnomalyStatus, AnomalyStatus[]> = {
  open: ["acknowledged", "resolved"],
  acknowledged: ["resolved", "open"],
  resolved: ["open"],
};

/**
 * A fresh-key duplicate's status is the operator's verdict on it: acknowledged = a genuine repeat
 * (the caller meant the action twice), resolved = a duplicate that got through (confirmed; the
 * tool's page counts it). The trail records the verdict as its own action.
 */
export const FRESH_KEY_VERDICTS = {
  acknowledged: { verdict: "genuine_repeat", action: "confirm_genuine_repeat" },
  resolved: { verdict: "duplicate", action: "confirm_duplicate" },
} as const;

function trailAction(type: string, status: AnomalyStatus): { action: string; verdict?: string } {
  if (type === "fresh_key_duplicate" && status !== "open") return FRESH_KEY_VERDICTS[status];
  return { action: status === "open" ? "reopen_anomaly" : status === "acknowledged" ? "acknowledge_anomaly" : "resolve_anomaly" };
}

/**
 * Acknowledge (seen, being handled), resolve (cause fixed) or reopen; recorded in the operator
 * trail. For a fresh-key duplicate, acknowledging says it was a genuine repeat and resolving
 * confirms a duplicate that got through (FRESH_KEY_VERDICTS).
 */
export async function setAnomalyStatus(
  prisma: PrismaClient,
  input: { id: string; status: AnomalyStatus; actor: string; reason: string },
) {
  const reason = requireReason(input.reason);
  const before = await getAnomaly(prisma, input.id);
  const from = before.status as AnomalyStatus;
  if (!ALLOWED[from]?.includes(input.status)) {
    throw new InvalidStateError(`an anomaly that is ${from} cannot become ${input.status}`, null);
  }
  // conditional on the status read, so two operators acting at once cannot both win
  const out = await prisma.anomaly.updateMany({ where: { id: input.id, status: from }, data: { status: input.status, updatedAt: new Date() } });
  if (out.count === 0) throw new InvalidStateError("the anomaly changed meanwhile; reload and try again", null);
  const { action, verdict } = trailAction(before.type, input.status);
  await recordOperatorAction(prisma, {
    actor: input.actor,
    action,
    reason,
    scope: before.scope,
    key: before.key,
    anomalyId: before.id,
    before: { status: from, type: before.type },
    after: { status: input.status, type: before.type, ...(verdict ? { verdict } : {}) },
  });
  return getAnomaly(prisma, input.id);
}
