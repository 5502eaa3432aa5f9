import { Prisma, type Execution } from "@/generated/prisma/client";
import { isPassThroughKey } from "@/lib/idempotency/key-rules";
import type { AnomalyOf, FreshKeyExecution } from "../anomaly-types";
import { fmt, retryWindow, type RetryWindow } from "@/lib/audit/retry-gaps";
import { nextPosition, startOf, type Position, type ScanCursor } from "../scan-cursor";
import type { CheckContext, CheckResult } from "./context";

/** Result bodies in the evidence are cut to this many characters. */
export const FRESH_KEY_BODY_LIMIT = 2_000;

/**
 * Outcomes of executions whose side effect may have happened. Not: failed (the tool said nothing
 * happened), released (an operator decided it did not), retried (sent again under the same key,
 * whose next execution stands for it).
 */
export const EFFECT_OUTCOMES = ["succeeded", "final_error", "unknown", "late_completion", "resolved"] as const;

// Audit times are `timestamp(3)` holding UTC; an ISO string cast to timestamp drops its "Z".
const ts = (d: Date) => Prisma.sql`${d.toISOString()}::timestamp`;
const effectOutcomes = Prisma.join(EFFECT_OUTCOMES.map((o) => Prisma.sql`${o}`));

/** An execution as the scan reads it. */
export interface ScannedExecution {
  id: string;
  scope: string;
  key: string;
  tool: string;
  fingerprint: string;
  fallback: boolean;
  startedAt: Date;
  leaseUntil: Date;
  outcome: string | null;
}

/** One execution to look up identical earlier calls for, with its tool's retry window. */
export type TwinQuery = Omit<ScannedExecution, "leaseUntil" | "outcome"> & { windowMs: number };

/**
 * The scan: executions after a position in (started_at, id) order, a range on the started_at index.
 * Exposed so tests can EXPLAIN exactly what runs.
 */
export function freshKeyScanSql(after: Position, until: Date, batch: number): Prisma.Sql {
  return Prisma.sql`
    SELECT id, scope, key, tool, fingerprint, fallback, started_at AS "startedAt", lease_until AS "leaseUntil", outcome
    FROM executions
    WHERE started_at >= ${ts(after.at)} AND (started_at > ${ts(after.at)} OR id > ${after.id}) AND started_at <= ${ts(until)}
    ORDER BY started_at, id
    LIMIT ${batch}::int`;
}

/**
 * For each execution, the earliest identical call before it (same scope, tool and fingerprint,
 * another key) that started within its window and may have had an effect: one range per execution
 * on the (scope, tool, fingerprint, started_at) index. Fallback executions are not matched with
 * each other: they share one key by construction, and their repeats are fallback dedupe's
 * business. Exposed so tests can EXPLAIN exactly what runs.
 */
export function freshKeyTwinsSql(rows: readonly TwinQuery[]): Prisma.Sql {
  const input = JSON.stringify(
    rows.map((r) => ({
      id: r.id,
      scope: r.scope,
      key: r.key,
      tool: r.tool,
      fingerprint: r.fingerprint,
      fallback: r.fallback,
      started_at: r.startedAt.toISOString(),
      window_ms: r.windowMs,
    })),
  );
  return Prisma.sql`
    SELECT d.id AS "duplicateId", o.id AS "originalId"
    FROM jsonb_to_recordset(${input}::jsonb)
      AS d(id text, scope text, key text, tool text, fingerprint text, fallback boolean, started_at timestamp(3), window_ms int)
    CROSS JOIN LATERAL (
      SELECT p.id FROM executions p
      WHERE p.scope = d.scope AND p.tool = d.tool AND p.fingerprint = d.fingerprint
        AND p.started_at >= d.started_at - d.window_ms * interval '1 millisecond'
        AND p.started_at <= d.started_at
        AND (p.started_at < d.started_at OR p.id < d.id)
        AND p.key <> d.key
        AND NOT (p.fallback AND d.fallback)
        AND (p.outcome IS NULL OR p.outcome IN (${effectOutcomes}))
      ORDER BY p.started_at, p.id
      LIMIT 1
    ) o`;
}

/**
 * Fresh-key duplicates: one tool in one scope ran twice for identical arguments under different
 * keys within the tool's retry window in that scope (retry-gaps.ts retryWindow): a caller retried under a fresh
 * key, and the side effect that the key should have guarded ran again. Genuine repeats farther
 * apart than the window are not flagged.
 *
 * Each execution that may have had an effect is compared with the identical calls before it and
 * flagged once, against the earliest one in its window (the original). An execution still running
 * within its lease cannot be judged yet: the scan's cursor stays before it until its outcome is
 * known or its lease passed (no outcome past the lease counts as a possible effect).
 */
export async function findFreshKeyDuplicates(ctx: CheckContext): Promise<CheckResult> {
  const start = startOf(ctx.cursor("fresh_key_duplicates"), ctx.since);
  const rows = await ctx.prisma.$queryRaw<ScannedExecution[]>(freshKeyScanSql(start, new Date(ctx.nowMs), ctx.batch));

  // an execution still running within its lease is judged once it ended (or its lease passed)
  const running = (e: ScannedExecution) => e.outcome === null && e.leaseUntil.getTime() >= ctx.nowMs && !isPassThroughKey(e.key);
  const pending = rows.findIndex(running);
  // pass-through calls (reads the log records) are idempotent by their tool's word: repeats are theirs to make
  const candidates = rows.filter((e) => !running(e) && !isPassThroughKey(e.key) && (e.outcome === null || (EFFECT_OUTCOMES as readonly string[]).includes(e.outcome)));

  // learnt per tool and scope (context.ts retryGapsOf): another tenant's replays change nothing here
  const windows = new Map<string, RetryWindow>();
  const windowOf = (e: { tool: string; scope: string }) => windows.get(`${e.tool}\n${e.scope}`)!;
  for (const e of candidates) {
    const name = `${e.tool}\n${e.scope}`;
    if (!windows.has(name)) windows.set(name, retryWindow(await ctx.retryGaps(e.tool, e.scope)));
  }

  const pairs =
    candidates.length === 0
      ? []
      : await ctx.prisma.$queryRaw<{ duplicateId: string; originalId: string }[]>(
          freshKeyTwinsSql(candidates.map((e) => ({ ...e, windowMs: windowOf(e).windowMs }))),
        );
  const full = new Map<string, Execution>();
  if (pairs.length > 0) {
    const ids = [...new Set(pairs.flatMap((p) => [p.duplicateId, p.originalId]))];
    for (const e of await ctx.prisma.execution.findMany({ where: { id: { in: ids } } })) full.set(e.id, e);
  }
  const flagged: AnomalyOf<"fresh_key_duplicate">[] = [];
  for (const p of pairs) {
    const duplicate = full.get(p.duplicateId);
    const original = full.get(p.originalId);
    if (duplicate && original) flagged.push(freshKeyDuplicate(original, duplicate, windowOf(duplicate)));
  }

  // the cursor stays before the first running execution: the next pass reads from there (what it
  // judges again is stored once, by its dedupe key)
  const heldBack = pending !== -1;
  const judged = heldBack ? rows.slice(0, pending) : rows;
  const last: Position | null = judged.length ? { at: judged[judged.length - 1].startedAt, id: judged[judged.length - 1].id } : null;
  const stopped = rows.length >= ctx.batch || heldBack;
  const position = heldBack && last === null ? start : nextPosition(start, last, stopped, ctx.settledAt);
  const next: ScanCursor = { ...position, caughtUp: !stopped, roundStartedAt: null };
  return { examined: rows.length, flagged, cursors: { fresh_key_duplicates: next } };
}

function described(e: Execution): FreshKeyExecution {
  const body = e.resultBody;
  return {
    executionId: e.id,
    key: e.key,
    fallback: e.fallback,
    session: e.session,
    caller: e.caller,
    startedAt: e.startedAt.toISOString(),
    outcome: e.outcome,
    resultStatus: e.resultStatus,
    resultBody: body === null ? null : body.slice(0, FRESH_KEY_BODY_LIMIT),
    resultBodyTruncated: body !== null && body.length > FRESH_KEY_BODY_LIMIT,
  };
}

function freshKeyDuplicate(original: Execution, duplicate: Execution, window: RetryWindow): AnomalyOf<"fresh_key_duplicate"> {
  const gapMs = duplicate.startedAt.getTime() - original.startedAt.getTime();
  const windowText = window.source === "default" ? `the default retry window of ${fmt(window.windowMs)}` : `its retry window of ${fmt(window.windowMs)}`;
  return {
    type: "fresh_key_duplicate",
    dedupeKey: `fresh_key_duplicate:${duplicate.id}`,
    tool: duplicate.tool,
    scope: duplicate.scope,
    key: duplicate.key,
    summary:
      `${duplicate.tool} ran twice for identical arguments under two keys, ${fmt(gapMs)} apart (within ${windowText}): ` +
      `probably one action retried under a fresh key, its side effect done twice`,
    evidence: {
      fingerprint: duplicate.fingerprint,
      original: described(original),
      duplicate: described(duplicate),
      gapMs,
      windowMs: window.windowMs,
      windowSource: window.source,
      samples: window.samples,
    },
  };
}
