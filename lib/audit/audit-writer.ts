import type { PrismaClient } from "@/generated/prisma/client";
import { isUniqueViolation } from "@/lib/db/errors";
import { COMPLETION_NOT_STORED, OpenExecutionError, type AuditWriter, type ClosedOutcome, type ExecutionOutcome, type IntentEntry, type OutcomeEntry, type PriorExecution, type SuppressionEntry } from "@/lib/idempotency/audit-port";

export type AuditMode = "durable" | "async";

/** After a key-store loss, an unfinished call keeps its key blocked (through the log) this long. */
const OPEN_CALL_RECOVERY_MS = 7 * 24 * 60 * 60 * 1000;

export interface AuditWriterOptions {
  mode?: AuditMode;
  /** how often queued rows are written */
  flushIntervalMs?: number;
  /** a batch this large is written at once */
  maxBatch?: number;
  /** told about a batch that could not be written (kept queued and tried again) */
  onError?: (err: unknown) => void;
  /**
   * Runs the writer's statements (intents, batches) through the database driver itself
   * (`Database.execute`) instead of Prisma's query pipeline, which costs more CPU than the
   * statements. Same SQL either way; without it they go through `$executeRawUnsafe`.
   */
  execute?: (sql: string, params: readonly unknown[]) => Promise<number>;
}

/**
 * Writes the audit log. In `durable` mode (the default) an execution's intent is in the database
 * before the tool runs; outcomes and suppressions are queued and written in batches off the hot
 * path. In `async` mode intents are batched too: faster, but a crash can lose an intent, so orphan
 * detection is weaker there.
 */
export class PrismaAuditWriter implements AuditWriter {
  readonly mode: AuditMode;
  private intents: IntentEntry[] = [];
  private outcomes: OutcomeEntry[] = [];
  private suppressions: SuppressionEntry[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  /** the batch being written: out of the queues, maybe not yet in the database */
  private writing: { intents: IntentEntry[]; outcomes: OutcomeEntry[] } = { intents: [], outcomes: [] };
  private closed = false;
  private readonly flushIntervalMs: number;
  private readonly maxBatch: number;
  private readonly onError: (err: unknown) => void;
  private readonly execute: (sql: string, params: readonly unknown[]) => Promise<number>;

  constructor(
    private readonly prisma: PrismaClient,
    options: AuditWriterOptions = {},
  ) {
    this.mode = options.mode ?? "durable";
    this.flushIntervalMs = options.flushIntervalMs ?? 50;
    this.maxBatch = options.maxBatch ?? 500;
    this.onError = options.onError ?? ((err) => console.error("audit log write failed; will retry", err));
    this.execute = options.execute ?? ((sql, params) => prisma.$executeRawUnsafe(sql, ...params));
  }

  async intent(entry: IntentEntry): Promise<void> {
    if (this.mode === "async") {
      this.intents.push(entry);
      this.schedule();
      return;
    }
    try {
      await this.insertIntent(entry);
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      // Another execution of this key has no outcome in the database: maybe only because its
      // outcome is still queued here. Write the queue, then try once more.
      await this.flush();
      try {
        await this.insertIntent(entry);
      } catch (again) {
        if (isUniqueViolation(again)) throw new OpenExecutionError(entry.scope, entry.key);
        throw again;
      }
    }
  }

  private async insertIntent(entry: IntentEntry): Promise<void> {
    // one statement, one round trip: no implicit transaction around it
    const i = intentJson(entry);
    await this.execute(INSERT_INTENT, [
      i.id, i.scope, i.key, i.tool, i.fingerprint, String(i.token), i.session, i.caller, i.fallback, i.started_at, i.lease_until,
    ]);
  }

  outcome(entry: OutcomeEntry): void {
    this.outcomes.push(entry);
    this.schedule();
  }

  suppression(entry: SuppressionEntry): void {
    this.suppressions.push(entry);
    this.schedule();
  }

  async priorExecution(scope: string, key: string, since: Date): Promise<PriorExecution | null> {
    // Rows still queued (or being written) are the newest and the database may not have them yet:
    // take them before asking, and lay them over the answer. Nothing waits for a flush.
    const sameKey = (e: { scope: string; key: string }) => e.scope === scope && e.key === key;
    const queuedIntents = [...this.writing.intents, ...this.intents].filter((i) => sameKey(i) && i.startedAt >= since);
    const queuedOutcomes = [...this.writing.outcomes, ...this.outcomes];
    const row = await this.prisma.execution.findFirst({ where: { scope, key, startedAt: { gte: since } }, orderBy: { startedAt: "desc" } });
    let prior: PriorExecution | null = row
      ? {
          id: row.id,
          fingerprint: row.fingerprint,
          tool: row.tool,
          session: row.session,
          startedAt: row.startedAt,
          leaseUntil: row.leaseUntil,
          outcome: row.outcome as PriorExecution["outcome"],
          resultStatus: row.resultStatus,
          resultBody: row.resultBody,
          resultFinal: row.resultFinal,
          expiresAt: row.expiresAt,
          error: row.error,
          finishedAt: row.finishedAt,
        }
      : null;
    for (const i of queuedIntents) {
      if (!prior || i.startedAt >= prior.startedAt) {
        prior = { ...i, outcome: null, resultStatus: null, resultBody: null, resultFinal: null, expiresAt: null, error: null, finishedAt: null };
      }
    }
    const outcome = prior && queuedOutcomes.findLast((o) => o.id === prior!.id);
    if (prior && outcome) {
      prior = {
        ...prior,
        outcome: outcome.outcome,
        resultStatus: outcome.resultStatus,
        resultBody: outcome.resultBody,
        resultFinal: outcome.resultFinal,
        expiresAt: outcome.expiresAt,
        error: outcome.error,
        finishedAt: outcome.finishedAt,
      };
    }
    return prior;
  }


  async recoveryWindowEnd(epochMs: number): Promise<number | null> {
    await this.flush();
    const epoch = new Date(epochMs);
    const [results, open] = await Promise.all([
      this.prisma.execution.aggregate({ _max: { expiresAt: true }, where: { startedAt: { lt: epoch }, expiresAt: { gt: epoch } } }),
      // an unfinished call blocks its key until an operator decides: as long as its record would have
      this.prisma.execution.aggregate({ _max: { startedAt: true }, where: { startedAt: { lt: epoch }, OR: [{ outcome: null }, { outcome: "unknown" }] } }),
    ]);
    const ends = [results._max.expiresAt?.getTime(), open._max.startedAt ? epochMs + OPEN_CALL_RECOVERY_MS : undefined].filter(
      (v): v is number => v !== undefined,
    );
    return ends.length ? Math.max(...ends) : null;
  }

  async closeOpenExecution(
    executionId: string,
    outcome: ClosedOutcome,
    reason: string,
    result?: { status: number; body: string; final: boolean; expiresAt: Date },
  ): Promise<boolean> {
    const out = await this.prisma.execution.updateMany({
      where: { id: executionId, OR: [{ outcome: null }, { outcome: "unknown" }] },
      data: {
        outcome,
        finishedAt: new Date(),
        error: outcome === "retried" ? `sent again with the same key: ${reason}` : `${outcome}: ${reason}`,
        ...(result ? { resultStatus: result.status, resultBody: result.body, resultFinal: result.final, expiresAt: result.expiresAt } : {}),
      },
    });
    if (out.count > 0) return true;
    if (outcome === "released") {
      // The call completed while its key was being released: its result has no done record.
      await this.prisma.execution.updateMany({
        where: { id: executionId, outcome: { in: ["succeeded", "final_error"] }, error: { startsWith: COMPLETION_NOT_STORED } },
        data: { outcome: "late_completion", error: `completed while its key was released: ${reason}` },
      });
    }
    return false;
  }


  get pending(): number {
    return this.intents.length + this.outcomes.length + this.suppressions.length;
  }

  /** Writes everything queued so far, waiting for a write already under way; callers share one write. */
  async flush(): Promise<void> {
    for (;;) {
      if (this.flushing) {
        // someone else's batch: if it fails its rows are queued again and written below
        await this.flushing.catch(() => {});
        continue;
      }
      if (this.pending === 0) return;
      this.flushing = this.writeBatch().finally(() => {
        this.flushing = null;
      });
      await this.flushing;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.flush();
  }

  private schedule(): void {
    if (this.closed) return;
    if (this.pending >= this.maxBatch) {
      void this.flush().catch(this.onError);
      return;
    }
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flush().catch((err) => {
        this.onError(err);
        this.schedule();
      });
    }, this.flushIntervalMs);
    this.timer.unref?.();
  }

  private async writeBatch(): Promise<void> {
    const intents = this.intents.splice(0, this.maxBatch);
    const outcomes = this.outcomes.splice(0, this.maxBatch);
    const suppressions = this.suppressions.splice(0, this.maxBatch);
    this.writing = { intents, outcomes };
    try {
      // An outcome whose intent is in the same batch (async mode) is written with it as one row;
      // the others update rows already written. Each kind is one statement over a JSON array:
      // no per-row work in the query engine, whatever the batch size.
      const rows = new Map(intents.map((i) => [i.id, { ...intentJson(i) } as Record<string, unknown>]));
      const updates: OutcomeEntry[] = [];
      for (const o of outcomes) {
        const row = rows.get(o.id);
        if (row) Object.assign(row, outcomeJson(o));
        else updates.push(o);
      }
      // one statement, so all of it or nothing is written
      await this.execute(WRITE_BATCH, [
        JSON.stringify([...rows.values()]),
        JSON.stringify(updates.map(outcomeJson)),
        JSON.stringify(suppressions.map(suppressionJson)),
      ]);
    } catch (err) {
      // keep them for the next attempt, in order
      this.intents.unshift(...intents);
      this.outcomes.unshift(...outcomes);
      this.suppressions.unshift(...suppressions);
      throw err;
    } finally {
      this.writing = { intents: [], outcomes: [] };
    }
  }

}

const INSERT_INTENT = `
  INSERT INTO executions (id, scope, key, tool, fingerprint, token, session, caller, fallback, started_at, lease_until)
  VALUES ($1, $2, $3, $4, $5, $6::bigint, $7, $8, $9::boolean, $10::timestamptz, $11::timestamptz)`;

/**
 * A batch: new executions (with their outcome when it is in the same batch), outcomes of executions
 * written before, and suppressions, each a JSON array ($1, $2, $3) read by jsonb_to_recordset; the
 * data-modifying CTEs run whether or not anything reads them.
 */
const WRITE_BATCH = `
  WITH new_executions AS (
    INSERT INTO executions (id, scope, key, tool, fingerprint, token, session, caller, fallback, started_at, lease_until,
                            outcome, finished_at, duration_ms, result_status, result_body, result_final, expires_at, error)
    SELECT id, scope, key, tool, fingerprint, token, session, caller, fallback, started_at, lease_until,
           outcome, finished_at, duration_ms, result_status, result_body, result_final, expires_at, error
    FROM jsonb_to_recordset($1::jsonb) AS v(
      id text, scope text, key text, tool text, fingerprint text, token bigint, session text, caller text, fallback boolean,
      started_at timestamptz, lease_until timestamptz, outcome text, finished_at timestamptz, duration_ms int,
      result_status int, result_body text, result_final boolean, expires_at timestamptz, error text)
    ON CONFLICT DO NOTHING
    RETURNING 1
  ), outcomes AS (
    -- an execution released by an operator while it ran keeps its release; a result arriving
    -- after it is a late completion (it has no done record, and a retry may run it again)
    UPDATE executions AS e SET
      outcome = CASE WHEN e.outcome = 'released' THEN 'late_completion' ELSE v.outcome END,
      finished_at = v.finished_at, duration_ms = v.duration_ms,
      result_status = v.result_status, result_body = v.result_body, result_final = v.result_final,
      expires_at = v.expires_at,
      error = CASE WHEN e.outcome = 'released' THEN 'completed after its key was released (' || coalesce(e.error, '') || ')' ELSE v.error END
    FROM jsonb_to_recordset($2::jsonb) AS v(
      id text, outcome text, finished_at timestamptz, duration_ms int, result_status int,
      result_body text, result_final boolean, expires_at timestamptz, error text)
    WHERE e.id = v.id
      AND (e.outcome IS NULL OR (e.outcome = 'released' AND v.outcome IN ('succeeded', 'final_error', 'late_completion')))
    RETURNING 1
  )
  INSERT INTO suppressions (id, scope, key, tool, kind, fallback, gap_ms, session, caller, original_session, original_execution_id, at)
  SELECT id, scope, key, tool, kind, fallback, gap_ms, session, caller, original_session, original_execution_id, at
  FROM jsonb_to_recordset($3::jsonb) AS v(
    id text, scope text, key text, tool text, kind text, fallback boolean, gap_ms int, session text, caller text,
    original_session text, original_execution_id text, at timestamptz)
  ON CONFLICT DO NOTHING`;

function outcomeJson(o: OutcomeEntry) {
  return {
    id: o.id,
    outcome: o.outcome,
    finished_at: o.finishedAt.toISOString(),
    duration_ms: o.durationMs,
    result_status: o.resultStatus,
    result_body: o.resultBody,
    result_final: o.resultFinal,
    expires_at: o.expiresAt?.toISOString() ?? null,
    error: o.error,
  };
}

function intentJson(e: IntentEntry) {
  return {
    id: e.id,
    scope: e.scope,
    key: e.key,
    tool: e.tool,
    fingerprint: e.fingerprint,
    token: e.token,
    session: e.session,
    caller: e.caller,
    fallback: e.fallback,
    started_at: e.startedAt.toISOString(),
    lease_until: e.leaseUntil.toISOString(),
  };
}

function suppressionJson(s: SuppressionEntry) {
  return {
    id: s.id,
    scope: s.scope,
    key: s.key,
    tool: s.tool,
    kind: s.kind,
    fallback: s.fallback,
    gap_ms: s.gapMs,
    session: s.session,
    caller: s.caller,
    original_session: s.originalSession,
    original_execution_id: s.originalExecutionId,
    at: s.at.toISOString(),
  };
}
