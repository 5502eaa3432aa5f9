import type { PrismaClient } from "@/generated/prisma/client";

/**
 * The scans of the audit log and the tools' tables the reconciler keeps a cursor for:
 * - silent_executions: intents with no outcome, by (lease_until, id): judged once the lease passed;
 * - unknown_outcomes: executions that ended unknown, by (finished_at, id);
 * - late_completions: by (finished_at, id);
 * - lost_completions: finished executions, by (started_at, id), re-examined in rounds;
 * - unrecorded_effects: the tools' side effects, by (created_at, tool:effect id);
 * - stale_suppressions: replays, by (at, id);
 * - fresh_key_duplicates: executions, by (started_at, id): each compared with the identical calls
 *   before it within its tool's retry window;
 * - held_calls: executions the log holds open, by (lease_until, id), round and round: a key the
 *   key store lost is held again (checks/held-calls.ts);
 * - results_over_limit: results stored as a placeholder over their scope's limit, by (finished_at, id).
 * - settled_anomalies: open per-key anomalies, by (detected_at, id), round and round: those whose
 *   key needs nobody any more are closed (checks/settled-anomalies.ts).
 * - argument_index: executions, by (started_at, id): the search's copy of their kept arguments is
 *   written where the audit writer's process stopped before writing it (lib/audit/argument-index.ts).
 */
export const SCANS = [
  "silent_executions",
  "unknown_outcomes",
  "late_completions",
  "lost_completions",
  "unrecorded_effects",
  "stale_suppressions",
  "fresh_key_duplicates",
  "held_calls",
  "results_over_limit",
  "settled_anomalies",
  "argument_index",
] as const;
export type ScanName = (typeof SCANS)[number];

/** A position in a scan: every row at or before (at, id) in (time, id) order has been examined. */
export interface Position {
  at: Date;
  id: string;
}

export interface ScanCursor extends Position {
  /** the pass that left it read fewer rows than its batch: it had seen everything up to then */
  caughtUp: boolean;
  /** scans that re-examine in rounds: when the current round began */
  roundStartedAt: Date | null;
}

/** The stored cursors; a scan that has none starts at the beginning of the lookback window. */
export async function loadCursors(prisma: PrismaClient): Promise<Map<ScanName, ScanCursor>> {
  const rows = await prisma.reconcilerCursor.findMany();
  return new Map(rows.map((r) => [r.name as ScanName, { at: r.afterAt, id: r.afterId, caughtUp: r.caughtUp, roundStartedAt: r.roundStartedAt }]));
}

export async function saveCursor(prisma: PrismaClient, name: ScanName, cursor: ScanCursor, nowMs: number): Promise<void> {
  const data = { afterAt: cursor.at, afterId: cursor.id, caughtUp: cursor.caughtUp, roundStartedAt: cursor.roundStartedAt, updatedAt: new Date(nowMs) };
  await prisma.reconcilerCursor.upsert({ where: { name }, create: { name, ...data }, update: data });
}

export function comparePositions(a: Position, b: Position): number {
  const t = a.at.getTime() - b.at.getTime();
  return t !== 0 ? t : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

const later = (a: Position, b: Position) => (comparePositions(a, b) >= 0 ? a : b);
const earlier = (a: Position, b: Position) => (comparePositions(a, b) <= 0 ? a : b);

/** Where a scan starts: its cursor, but nothing older than the lookback window. */
export function startOf(cursor: ScanCursor | undefined, since: Date): Position {
  const start: Position = { at: since, id: "" };
  return cursor ? later(cursor, start) : start;
}

/**
 * Where the next pass continues. Rows are written a little after their time (outcomes and
 * suppressions in batches, intents too in async audit mode), so a row may still appear at a time
 * the scan has passed: the cursor never moves past `settledAt`, and rows newer than that are read
 * again by the next pass (they were judged already; anomalies are stored once by their dedupe key).
 * A scan that read fewer rows than it asked for has seen everything up to now.
 */
export function nextPosition(start: Position, last: Position | null, full: boolean, settledAt: Date): Position {
  const settled: Position = { at: settledAt, id: "" };
  const reached = full && last ? earlier(last, settled) : settled;
  return later(start, reached);
}

/** The cursor an ordinary (once-only) scan leaves after reading `rows` of at most `batch`. */
export function advance(start: Position, last: Position | null, read: number, batch: number, settledAt: Date): ScanCursor {
  const full = read >= batch;
  return { ...nextPosition(start, last, full, settledAt), caughtUp: !full, roundStartedAt: null };
}

/**
 * Prisma's `where` for the rows after a position in (field, id) order. The redundant lower bound
 * on the field lets an index on it serve the scan.
 */
export function rowsAfter<F extends string>(field: F, p: Position) {
  return {
    [field]: { gte: p.at },
    OR: [{ [field]: { gt: p.at } }, { id: { gt: p.id } }],
  } as { [K in F]: { gte: Date } } & { OR: ({ [K in F]: { gt: Date } } | { id: { gt: string } })[] };
}
