import { randomUUID } from "node:crypto";
import type { Anomaly, Prisma, PrismaClient } from "@/generated/prisma/client";
import type { KeyStore } from "@/lib/idempotency/key-store";
import type { ListEffects } from "@/lib/tools/effects";
import type { NewAnomaly } from "./anomaly-types";
import { indexMissingArguments as indexMissingArgumentsSince, indexMissingArgumentsAfter } from "@/lib/audit/argument-index";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { retryGapsOf, type AuditRecovery, type CheckContext, type CheckResult } from "./checks/context";
import { findFreshKeyDuplicates } from "./checks/fresh-key-duplicates";
import { restoreHeldCalls } from "./checks/held-calls";
import { findLateCompletions } from "./checks/late-completions";
import { lossIncident } from "./checks/key-store-loss";
import { findLostCompletions, LOST_COMPLETION_ROUND_MS } from "./checks/lost-completions";
import { closeSettledAnomalies } from "./checks/settled-anomalies";
import { probeHeldKeys, type ProbedKey, type ProbeOptions, type ReconcileProbes } from "./checks/probe-keys";
import { findResultsOverLimit } from "./checks/results-over-limit";
import { findStaleSuppressions } from "./checks/stale-suppressions";
import { findUnknownOutcomes } from "./checks/unknown-outcomes";
import { findUnrecordedEffects } from "./checks/unrecorded-effects";
import { advance, loadCursors, saveCursor, startOf, type ScanName } from "./scan-cursor";

export type { AuditRecovery } from "./checks/context";
export { ANOMALY_TYPES, type AnomalyOf, type AnomalyType, type EvidenceByType, type NewAnomaly } from "./anomaly-types";
export { freshKeyScanSql, freshKeyTwinsSql, FRESH_KEY_BODY_LIMIT } from "./checks/fresh-key-duplicates";
export { ProbeRotation, RECONCILER_ACTOR, type ProbedKey, type ReconcileProbes } from "./checks/probe-keys";

export interface ReconcileDeps {
  prisma: PrismaClient;
  store: KeyStore;
  /**
   * the engine over this store and log (the runtime's): what a retry is told after a key-store
   * loss, as it decides it. Default: an engine over `store` and an audit writer on `prisma`.
   */
  engine?: AuditRecovery;
  /** side effects the tools committed since a time (the tools that can list theirs) */
  listEffects?: ListEffects;
  /** the tools' status probes: unknown and stuck keys of tools that have one are asked about */
  probes?: ReconcileProbes;
  /**
   * carries out the decisions about held keys written before a time and never recorded (their
   * process stopped half-way: lib/operator/key-decisions.ts); returns how many
   */
  finishDecisions?: (before: Date) => Promise<number>;
  /**
   * called with the anomalies a pass opens, inside the transaction that stores them (the webhook
   * outbox: an event is queued exactly when its anomaly is, whichever process found it)
   */
  onOpened?: (tx: Prisma.TransactionClient, opened: Anomaly[]) => Promise<void>;
}

export interface ReconcileOptions extends ProbeOptions {
  nowMs?: number;
  /** how far back a scan without a cursor starts (default 25 h: a day's TTL plus leases) */
  lookbackMs?: number;
  /**
   * how long after its time a row may still be written (outcomes and suppressions are written in
   * batches): scans re-read rows younger than this next pass (default 30 s)
   */
  settleMs?: number;
  /** side effects younger than this are not judged yet: their intent may still be on its way (async audit) */
  effectGraceMs?: number;
  /** rows each scan examines per pass */
  batch?: number;
  /** the lost-completion scan begins a new round over the lookback window at most this often */
  lostCompletionRoundMs?: number;
}

export interface ReconcileReport {
  /** what this pass read: audit rows, side effects, and keys whose tool was asked */
  examined: { executions: number; suppressions: number; effects: number; keys: number };
  /** intents whose outcome was lost while the key store has their done record: outcome filled in */
  backfilled: number;
  /** calls the log holds open whose record the key store had lost: held again as unknown */
  restored: number;
  /** decisions about held keys whose process stopped before recording them, carried out */
  finished: number;
  flagged: NewAnomaly[];
  /** of those, how many were not known already */
  created: number;
  /** keys whose tool was asked, with its answer and what was done */
  probed: ProbedKey[];
  /** open anomalies closed because their key needs nobody any more (decided, done, restored) */
  settled: number;
  /**
   * executions whose kept arguments the search could not find: their process stopped between the
   * intent and the copy the search reads (lib/audit/argument-index.ts); copied now
   */
  argumentsIndexed: number;
}

/**
 * One reconciler pass: finds the two ways an idempotency layer fails quietly and stores each
 * finding once (by its dedupe key) with its evidence, then asks the tools that can tell about
 * their unknown and stuck keys.
 *
 * Orphaned side effects (it happened, or may have, with no done record): unknown outcomes, lost
 * completions, late completions, unrecorded effects (checks/). Stale suppressions: a new action
 * answered as a duplicate. Fresh-key duplicates: the opposite, a duplicate run as a new action
 * because its caller sent it under another key.
 *
 * Before the checks, decisions about held keys whose process stopped before recording them are
 * carried out (lib/operator/key-decisions.ts), and calls the log holds open whose key the key store lost (a Redis loss) are held
 * in the store again as unknown (checks/held-calls.ts), so lists, counts, probes and decisions
 * cover them as a retry would.
 *
 * Each scan continues where the previous pass left it (a cursor on (time, id) per scan, stored in
 * reconciler_cursors; see scan-cursor.ts), so a busy log is read once, in order, `batch` rows per
 * scan and pass. A check's findings are stored before its cursor moves: a pass that fails half-way
 * reads those rows again.
 */
export async function reconcile(deps: ReconcileDeps, options: ReconcileOptions = {}): Promise<ReconcileReport> {
  const nowMs = options.nowMs ?? Date.now();
  const cursors = await loadCursors(deps.prisma);
  const ctx: CheckContext = {
    prisma: deps.prisma,
    store: deps.store,
    recovery: deps.engine ?? new Engine({ store: deps.store, audit: new PrismaAuditWriter(deps.prisma) }),
    nowMs,
    since: new Date(nowMs - (options.lookbackMs ?? 25 * 3_600_000)),
    batch: options.batch ?? 5_000,
    settledAt: new Date(nowMs - (options.settleMs ?? 30_000)),
    cursor: (name: ScanName) => cursors.get(name),
    retryGaps: retryGapsOf(deps.prisma, nowMs),
  };
  const report: ReconcileReport = { examined: { executions: 0, suppressions: 0, effects: 0, keys: 0 }, backfilled: 0, restored: 0, finished: 0, flagged: [], created: 0, probed: [], settled: 0, argumentsIndexed: 0 };

  const keep = async (result: CheckResult): Promise<number> => {
    report.flagged.push(...result.flagged);
    report.backfilled += result.backfilled ?? 0;
    report.created += await storeAnomalies(deps.prisma, result.flagged, nowMs, deps.onOpened);
    for (const [name, cursor] of Object.entries(result.cursors)) await saveCursor(deps.prisma, name as ScanName, cursor, nowMs);
    return result.examined;
  };

  // First, so a decided call is not held again below as if nobody had decided it.
  if (deps.finishDecisions) report.finished = await deps.finishDecisions(ctx.settledAt);

  // Then, so the checks and the probes below see every held key in the store, as a retry would.
  const held = await restoreHeldCalls(ctx);
  report.restored = held.restored;
  await saveCursor(deps.prisma, "held_calls", held.cursor, nowMs);

  report.examined.executions += await keep(await findUnknownOutcomes(ctx));
  report.examined.executions += await keep(await findLateCompletions(ctx));
  const lost = await findLostCompletions(ctx, options.lostCompletionRoundMs ?? LOST_COMPLETION_ROUND_MS);
  report.examined.executions += await keep(lost);
  if (lost.incident) {
    // after its open findings are stored, so it counts them
    const incident = await lossIncident(ctx, lost.incident.dedupeKey, lost.incident.keys);
    if (incident) {
      report.flagged.push(incident);
      report.created += await storeAnomalies(deps.prisma, [incident], nowMs, deps.onOpened);
    }
  }
  if (deps.listEffects) report.examined.effects += await keep(await findUnrecordedEffects(ctx, deps.listEffects, options.effectGraceMs ?? 30_000));
  report.examined.suppressions += await keep(await findStaleSuppressions(ctx));
  report.examined.executions += await keep(await findFreshKeyDuplicates(ctx));
  report.examined.executions += await keep(await findResultsOverLimit(ctx));
  report.argumentsIndexed = await indexMissingArguments(ctx);

  // Last, so an unknown outcome is on record before its tool's answer settles it (and closes it).
  if (deps.probes) {
    const asked = await probeHeldKeys(ctx, deps.probes, options);
    report.examined.keys = asked.examined;
    report.probed = asked.probed;
  }

  // After the probes, so an anomaly flagged this pass about a key decided meanwhile is closed now.
  const settled = await closeSettledAnomalies(ctx);
  report.settled = settled.closed;
  await saveCursor(deps.prisma, "settled_anomalies", settled.cursor, nowMs);
  return report;
}

/**
 * The search's copies of kept arguments that the audit writer did not write (lib/audit/argument-index.ts):
 * each execution is read once, after the previous pass's, as the other scans read them; so a pass
 * costs the executions written since the previous one, however large the log.
 */
async function indexMissingArguments(ctx: CheckContext): Promise<number> {
  const start = startOf(ctx.cursor("argument_index"), ctx.since);
  const scanned = await indexMissingArgumentsAfter(ctx.prisma, start, ctx.batch);
  await saveCursor(ctx.prisma, "argument_index", advance(start, scanned.last, scanned.examined, ctx.batch, ctx.settledAt), ctx.nowMs);
  return scanned.indexed;
}

/**
 * How long before the reconciler's `argument_index` cursor the pass at a server's start begins: the
 * longest an intent is expected to reach the log after its start (an async batch held while the
 * database is down), since the reconciler's scan, by start time, has passed it by then.
 */
export const ARGUMENT_INDEX_START_MARGIN_MS = 60 * 60_000;

/**
 * At a server's start: the search's copies of kept arguments that a process stopped before
 * writing (lib/audit/argument-index.ts), however long ago it stopped. The reconciler's scan has
 * examined every execution before its cursor, as committed by then, so this pass reads from the
 * cursor less ARGUMENT_INDEX_START_MARGIN_MS (no cursor: the whole log, once): the executions no
 * pass has read yet, that is, what was written while no reconciler ran. Returns how many copies it wrote.
 */
export async function indexMissingArgumentsAtStart(prisma: PrismaClient): Promise<number> {
  const cursor = (await loadCursors(prisma)).get("argument_index");
  return indexMissingArgumentsSince(prisma, cursor ? new Date(cursor.at.getTime() - ARGUMENT_INDEX_START_MARGIN_MS) : null);
}

/** Stores findings not known yet (by dedupe key), and tells `onOpened` of them in the same transaction; returns how many were new. */
async function storeAnomalies(prisma: PrismaClient, flagged: NewAnomaly[], nowMs: number, onOpened?: ReconcileDeps["onOpened"]): Promise<number> {
  if (flagged.length === 0) return 0;
  const at = new Date(nowMs);
  const data = flagged.map((a) => ({
    id: randomUUID(),
    type: a.type,
    dedupeKey: a.dedupeKey,
    tool: a.tool,
    scope: a.scope,
    key: a.key,
    status: "open",
    summary: a.summary,
    evidence: a.evidence as unknown as Prisma.InputJsonValue,
    detectedAt: at,
    updatedAt: at,
  }));
  if (!onOpened) return (await prisma.anomaly.createMany({ data, skipDuplicates: true })).count;
  return prisma.$transaction(async (tx) => {
    // ON CONFLICT DO NOTHING … RETURNING: only the rows this statement inserted
    const opened = await tx.anomaly.createManyAndReturn({ data, skipDuplicates: true });
    if (opened.length > 0) await onOpened(tx, opened);
    return opened.length;
  });
}
