import type { PrismaClient } from "@/generated/prisma/client";
import type { StatementOptions } from "@/lib/db/database";
import { isUniqueViolation } from "@/lib/db/errors";
import { COMPLETION_NOT_STORED, OPEN_CALL_RECOVERY_MS, OpenExecutionError, type AuditWriter, type ClosedOutcome, type ExecutionRow, type IntentEntry, type OutcomeEntry, type PriorExecution, type SuppressionEntry } from "@/lib/idempotency/audit-port";
import { mayRunAfter } from "@/lib/idempotency/transitions";
import { INDEX_EXECUTIONS } from "./argument-index";
import { GroupCommit, type ItemResults } from "./group-commit";

export type AuditMode = "durable" | "async";

/** Rows a writer holds in memory at most (queued or being written); see AuditWriterOptions.maxQueued. */
export const DEFAULT_MAX_QUEUED = 10_000;

export interface AuditWriterOptions {
  mode?: AuditMode;
  /** how often queued rows are written */
  flushIntervalMs?: number;
  /** a batch this large is written at once; also the most durable intents one commit carries */
  maxBatch?: number;
  /**
   * Rows held in memory at most, queued or being written (default DEFAULT_MAX_QUEUED). When the
   * database falls behind and this many are held: an async-mode intent waits until a batch has
   * made room (and fails, so nothing runs, when the batch cannot be written), as a durable intent
   * would; a suppression is dropped and counted (`droppedSuppressions`). Outcomes are always kept:
   * each belongs to a call whose intent was let in, so they stay within this bound plus the calls
   * in flight.
   */
  maxQueued?: number;
  /** how long close() keeps trying to write what is queued before it gives up (and says how much is lost) */
  closeTimeoutMs?: number;
  /** told about a batch that could not be written (kept queued and tried again) */
  onError?: (err: unknown) => void;
  /**
   * Runs the writer's statements (intents, batches) through the database driver itself
   * (`Database.execute`) instead of Prisma's query pipeline, which costs more CPU than the
   * statements. Same SQL either way; without it they go through `$executeRawUnsafe`. The writer
   * names its statements (`prepare`): a server keeps them prepared on each pooled connection, so
   * an intent is not parsed and planned again on every call (about half its statement's cost).
   */
  execute?: (sql: string, params: readonly unknown[], options?: StatementOptions) => Promise<number>;
  /**
   * Runs the writer's hot-path reads (a key's latest execution, which a reservation asks for in
   * a key store's first seconds and after it lost data) through the driver itself (`Database.query`);
   * without it they go through `$queryRawUnsafe`. Same SQL either way.
   */
  query?: (sql: string, params: readonly unknown[], options?: StatementOptions) => Promise<Record<string, unknown>[]>;
}

/**
 * Writes the audit log. In `durable` mode (the default) an execution's intent is in the database
 * before the tool runs. Concurrent calls' intents share one statement and one commit (group
 * commit): a lone intent is written at once, those arriving while a commit is under way go out
 * together in the next one, and each caller goes on only once the commit carrying its intent is
 * done. Outcomes and suppressions are queued and written in batches off the hot path. In `async`
 * mode intents are batched too: faster, but a crash can lose an intent, so orphan detection is
 * weaker there. Either way a crash loses what is queued (at most one flush interval's
 * rows while the database keeps up); close() writes it, and the server closes the writer on
 * SIGTERM/SIGINT (lib/process/start-server.ts).
 *
 * Order: an outcome is never written before its execution's intent. An intent and its outcome in
 * the same batch become one row; an outcome whose intent is still queued for a later batch waits
 * for that batch; and within a batch, outcomes are applied before new intents, so an execution they
 * finish no longer holds its key open when the next execution of the key is inserted.
 */
export class PrismaAuditWriter implements AuditWriter {
  readonly mode: AuditMode;
  private intents: IntentEntry[] = [];
  private outcomes: OutcomeEntry[] = [];
  private suppressions: SuppressionEntry[] = [];
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;
  /** the batch being written: out of the queues, maybe not yet in the database */
  private writing: { intents: IntentEntry[]; outcomes: OutcomeEntry[]; suppressions: number } = { intents: [], outcomes: [], suppressions: 0 };
  private closed = false;
  private dropped = 0;
  /** suppressions dropped since the last warning about it */
  private droppedUnreported = 0;
  private readonly flushIntervalMs: number;
  private readonly maxBatch: number;
  private readonly maxQueued: number;
  private readonly closeTimeoutMs: number;
  private readonly onError: (err: unknown) => void;
  private readonly execute: (sql: string, params: readonly unknown[], options?: StatementOptions) => Promise<number>;
  private readonly query: (sql: string, params: readonly unknown[], options?: StatementOptions) => Promise<Record<string, unknown>[]>;
  private readonly intentCommits: GroupCommit<IntentEntry>;
  /** executions whose intent is committed and whose kept arguments the search cannot see yet (argument-index.ts) */
  private unindexed: string[] = [];
  private indexTimer: NodeJS.Timeout | null = null;
  private indexWrites: Promise<void> = Promise.resolve();

  constructor(
    private readonly prisma: PrismaClient,
    options: AuditWriterOptions = {},
  ) {
    this.mode = options.mode ?? "durable";
    this.flushIntervalMs = options.flushIntervalMs ?? 50;
    this.maxBatch = options.maxBatch ?? 500;
    this.maxQueued = options.maxQueued ?? DEFAULT_MAX_QUEUED;
    this.closeTimeoutMs = options.closeTimeoutMs ?? 3_000;
    if (!(this.maxQueued >= 1)) throw new RangeError(`maxQueued must be at least 1, got ${this.maxQueued}`);
    this.onError = options.onError ?? ((err) => console.error("audit log write failed; will retry", err));
    this.execute = options.execute ?? ((sql, params) => prisma.$executeRawUnsafe(sql, ...params));
    this.query = options.query ?? ((sql, params) => prisma.$queryRawUnsafe<Record<string, unknown>[]>(sql, ...params));
    this.intentCommits = new GroupCommit((entries) => this.insertIntents(entries), this.maxBatch);
  }

  async intent(entry: IntentEntry, options: { durable?: boolean } = {}): Promise<void> {
    if (this.mode === "async" && !options.durable) {
      // The queue is bounded: when full, the caller waits for a batch to make room, and fails (the
      // call is refused, nothing runs) when the database cannot take it, as in durable mode.
      while (!this.closed && this.pending >= this.maxQueued) await this.writeNextBatch();
      if (!this.closed) {
        this.intents.push(entry);
        this.schedule();
        return;
      }
      // closed: nothing would write a queued row any more
    }
    try {
      await this.intentCommits.submit(entry);
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      // Another execution of this key has no outcome in the database: maybe only because its
      // outcome is still queued here. Write the queue; then this call may run only if that
      // execution's outcome says nothing ran. One that ran (its result was queued) must not run
      // again: a key store that lost a running call's reservation lets its retry reserve the key,
      // and that retry can read the log before the first call's intent commits, then get here
      // after its outcome was queued.
      await this.flushRows();
      const blocking = await this.priorExecution(entry.scope, entry.key, new Date(0));
      if (!blocking || !mayRunAfter(blocking, entry.startedAt.getTime())) throw new OpenExecutionError(entry.scope, entry.key);
      try {
        await this.insertIntent(entry);
      } catch (again) {
        if (isUniqueViolation(again)) throw new OpenExecutionError(entry.scope, entry.key);
        throw again;
      }
    }
    this.indexLater([entry], this.flushIntervalMs);
  }

  /**
   * Intents written at once (durable mode, or after close), the commits that carried them, and the
   * intents waiting for the commit under way to end.
   */
  get intentStats(): { commits: number; intents: number; waiting: number } {
    const { writes, items } = this.intentCommits.stats;
    return { commits: writes, intents: items, waiting: this.intentCommits.waiting };
  }

  /**
   * One commit for a group of intents: one statement, so all of them or none. An intent meeting an
   * open execution of its key (a unique violation) is an answer for that call alone: then each is
   * written on its own, and only the one in the way is refused.
   */
  private async insertIntents(entries: IntentEntry[]): Promise<ItemResults | void> {
    if (entries.length === 1) return this.insertIntent(entries[0]);
    try {
      await this.execute(INSERT_INTENTS, [JSON.stringify(entries.map(intentRow))], { prepare: "idemgate_audit_intents" });
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      return Promise.allSettled(entries.map((e) => this.insertIntent(e)));
    }
  }

  private async insertIntent(entry: IntentEntry): Promise<void> {
    // one statement, one round trip: no implicit transaction around it
    const e = entry;
    await this.execute(INSERT_INTENT, [
      e.id, e.scope, e.key, e.tool, e.fingerprint, String(e.token), e.session, e.caller, e.transport ?? "http", e.fallback, e.startedAt.toISOString(), e.leaseUntil.toISOString(),
      e.arguments ?? null, e.argumentsKept ?? null,
    ], { prepare: "idemgate_audit_intent" });
  }

  outcome(entry: OutcomeEntry): void {
    this.outcomes.push(entry);
    this.schedule();
  }

  suppression(entry: SuppressionEntry): void {
    if (this.pending >= this.maxQueued) {
      // Bounded: a duplicate's record is the one row that may go when the database falls behind
      // (it feeds statistics and stale-suppression checks, never a key's state or an anomaly).
      this.dropped++;
      if (this.droppedUnreported++ === 0) {
        console.warn(`idemgate: the audit log is ${this.pending} rows behind (at most ${this.maxQueued} are held); duplicates' suppression rows are dropped until it catches up`);
      }
      return;
    }
    this.suppressions.push(entry);
    this.schedule();
  }

  /** suppression rows dropped because the queue was full, since this writer started */
  get droppedSuppressions(): number {
    return this.dropped;
  }

  async priorExecution(scope: string, key: string, since: Date): Promise<PriorExecution | null> {
    // Rows still queued (or being written) are the newest and the database may not have them yet:
    // take them before asking, and lay them over the answer. Nothing waits for a flush.
    const sameKey = (e: { scope: string; key: string }) => e.scope === scope && e.key === key;
    const queuedIntents = [...this.writing.intents, ...this.intents].filter((i) => sameKey(i) && i.startedAt >= since);
    const queuedOutcomes = [...this.writing.outcomes, ...this.outcomes];
    const [row] = await this.query(LATEST_EXECUTION, [scope, key, since.toISOString()], { prepare: "idemgate_audit_latest_execution" });
    let prior: PriorExecution | null = row ? priorFromSql(row) : null;
    for (const i of queuedIntents) {
      if (!prior || i.startedAt >= prior.startedAt) {
        prior = { ...i, outcome: null, resultStatus: null, resultBody: null, resultFinal: null, expiresAt: null, error: null, finishedAt: null };
      }
    }
    const outcome = prior && queuedOutcomes.findLast((o) => o.id === prior!.id);
    // a queued outcome lands as WRITE_BATCH lays it: on an open execution, or as a late completion
    // of a released one; an operator's decision already written (released, resolved) stands
    const lands = (o: OutcomeEntry, on: PriorExecution["outcome"]) =>
      on === null || (on === "released" && (o.outcome === "succeeded" || o.outcome === "final_error" || o.outcome === "late_completion"));
    if (prior && outcome && lands(outcome, prior.outcome)) {
      prior = {
        ...prior,
        outcome: prior.outcome === "released" ? "late_completion" : outcome.outcome,
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


  async execution(id: string): Promise<ExecutionRow | null> {
    const queuedIntent = [...this.writing.intents, ...this.intents].find((i) => i.id === id);
    const queuedOutcome = [...this.writing.outcomes, ...this.outcomes].findLast((o) => o.id === id);
    const row = queuedIntent ? null : await this.prisma.execution.findUnique({ where: { id } });
    let found: ExecutionRow | null = queuedIntent
      ? { ...queuedIntent, outcome: null, resultStatus: null, resultBody: null, resultFinal: null, expiresAt: null, error: null, finishedAt: null }
      : row
        ? { ...priorFromRow(row), scope: row.scope, key: row.key, fallback: row.fallback }
        : null;
    // a queued outcome lands as WRITE_BATCH lays it (see priorExecution)
    if (found && queuedOutcome && (found.outcome === null || (found.outcome === "released" && queuedOutcome.outcome !== "failed" && queuedOutcome.outcome !== "unknown"))) {
      found = {
        ...found,
        outcome: found.outcome === "released" ? "late_completion" : queuedOutcome.outcome,
        resultStatus: queuedOutcome.resultStatus,
        resultBody: queuedOutcome.resultBody,
        resultFinal: queuedOutcome.resultFinal,
        expiresAt: queuedOutcome.expiresAt,
        error: queuedOutcome.error,
        finishedAt: queuedOutcome.finishedAt,
      };
    }
    return found;
  }

  async extendLease(id: string, leaseUntil: Date): Promise<void> {
    const queued = (i: IntentEntry) => i.id === id;
    if (this.intents.some(queued) || this.writing.intents.some(queued)) await this.flushRows();
    await this.prisma.execution.updateMany({ where: { id, outcome: null, leaseUntil: { lt: leaseUntil } }, data: { leaseUntil } });
  }

  async recoveryWindowEnd(epochMs: number): Promise<number | null> {
    await this.flushRows();
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
    // The fault suite's crash point: a process that stops after the key store carried a decision
    // and before the audit log recorded it (test/faults/decisions.test.ts). Never set in production.
    if (process.env.IDEMGATE_TEST_EXIT_BEFORE_DECISION_LOG === "1" && outcome !== "retried") process.exit(70);
    // an intent still queued here (async mode) goes in first, or this decision would match nothing
    const queued = (i: IntentEntry) => i.id === executionId;
    if (this.intents.some(queued) || this.writing.intents.some(queued)) await this.flushRows();
    const data = {
      outcome,
      finishedAt: new Date(),
      ...(result ? { resultStatus: result.status, resultBody: result.body, resultFinal: result.final, expiresAt: result.expiresAt } : {}),
    };
    // a call that never reported (stuck) keeps the decision's note; one that ended unknown keeps its
    // own note (what went wrong), and its duration: the key's timeline still shows that outcome
    // before the decision (the decision's reason is in the operator's action)
    const open = await this.prisma.execution.updateMany({
      where: { id: executionId, outcome: null },
      data: { ...data, error: outcome === "retried" ? `sent again with the same key: ${reason}` : `${outcome}: ${reason}` },
    });
    if (open.count > 0) return true;
    const out = await this.prisma.execution.updateMany({ where: { id: executionId, outcome: "unknown" }, data });
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


  /** Rows not yet known to be in the database: queued, or in the batch being written. */
  get pending(): number {
    return this.queued + this.writing.intents.length + this.writing.outcomes.length + this.writing.suppressions;
  }

  private get queued(): number {
    return this.intents.length + this.outcomes.length + this.suppressions.length;
  }

  /**
   * Writes everything queued so far, and the search's copies of the kept arguments of the intents
   * written (argument-index.ts): what a reader of the log and its search then finds.
   */
  async flush(): Promise<void> {
    await this.flushRows();
    await this.writeArgumentIndex();
  }

  /** Writes the rows queued so far, waiting for a write already under way; callers share one write. */
  private async flushRows(): Promise<void> {
    for (;;) {
      if (this.flushing) {
        // someone else's batch: if it fails its rows are queued again and written below
        await this.flushing.catch(() => {});
        continue;
      }
      if (this.queued === 0) return;
      await this.writeNextBatch();
    }
  }

  /** Waits for the batch being written, or writes the next one; rejects when that batch fails. */
  private writeNextBatch(): Promise<void> {
    this.flushing ??= this.writeBatch().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  /**
   * Writes what is queued, trying again for up to closeTimeoutMs while the database refuses; then
   * rejects saying how many rows are lost. Rows reported after close are written at once.
   */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.indexTimer) clearTimeout(this.indexTimer);
    this.indexTimer = null;
    const deadline = Date.now() + this.closeTimeoutMs;
    for (;;) {
      try {
        await this.flushRows();
        // once: a copy not written now is written again from the log at the next start (argument-index.ts)
        await this.writeArgumentIndex().catch((err) => this.onError(err));
        return;
      } catch (err) {
        const left = deadline - Date.now();
        if (left <= 0) {
          throw new Error(`${this.pending} audit rows could not be written before closing and are lost`, { cause: err });
        }
        this.onError(err);
        await new Promise((resolve) => setTimeout(resolve, Math.min(100, left)));
      }
    }
  }

  private schedule(): void {
    if (this.closed || this.queued >= Math.min(this.maxBatch, this.maxQueued)) {
      void this.flushRows().catch(this.onError);
      return;
    }
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flushRows().catch((err) => {
        this.onError(err);
        this.schedule();
      });
    }, this.flushIntervalMs);
    this.timer.unref?.();
  }

  private async writeBatch(): Promise<void> {
    const intents = this.intents.splice(0, this.maxBatch);
    // An outcome goes out with its intent or after it: one whose intent is still queued for a
    // later batch (async mode, more intents queued than one batch takes) waits for that batch.
    const later = new Set(this.intents.map((i) => i.id));
    const outcomes: OutcomeEntry[] = [];
    const waiting: OutcomeEntry[] = [];
    for (const o of this.outcomes) {
      if (outcomes.length < this.maxBatch && !later.has(o.id)) outcomes.push(o);
      else waiting.push(o);
    }
    this.outcomes = waiting;
    const suppressions = this.suppressions.splice(0, this.maxBatch);
    this.writing = { intents, outcomes, suppressions: suppressions.length };
    try {
      // An outcome whose intent is in the same batch (async mode) is written with it as one row;
      // the others update rows already written. Each kind is one JSON array of rows, each row an
      // array of its columns' values (no column names: about half the bytes of an object per row to
      // build, send and parse).
      const rows: unknown[][] = new Array(intents.length);
      const byId = outcomes.length > 0 ? new Map<string, unknown[]>() : null;
      for (let n = 0; n < intents.length; n++) {
        rows[n] = intentRow(intents[n]);
        byId?.set(intents[n].id, rows[n]);
      }
      const updates: unknown[][] = [];
      for (const o of outcomes) {
        const row = byId!.get(o.id);
        if (row) setOutcome(row, INTENT_COLUMNS, o);
        else updates.push(setOutcome([o.id], 1, o));
      }
      // one statement, so all of it or nothing is written
      await this.execute(WRITE_BATCH, [JSON.stringify(rows), JSON.stringify(updates), JSON.stringify(suppressions.map(suppressionRow))], { prepare: "idemgate_audit_batch" });
      this.indexLater(intents, 0);
      if (this.droppedUnreported > 0 && this.queued < this.maxQueued / 2) {
        console.warn(`idemgate: the audit log caught up; ${this.droppedUnreported} suppression rows were dropped meanwhile`);
        this.droppedUnreported = 0;
      }
    } catch (err) {
      // keep them for the next attempt, in order (the outcomes kept back belong to other executions)
      this.intents.unshift(...intents);
      this.outcomes.unshift(...outcomes);
      this.suppressions.unshift(...suppressions);
      throw err;
    } finally {
      this.writing = { intents: [], outcomes: [], suppressions: 0 };
    }
  }

  /**
   * The search's copies of these committed intents' kept arguments (argument-index.ts) go out
   * `afterMs` later, in one statement with the others waiting then: off the path a reservation
   * waits on (a durable intent's copy goes with the writer's next batch; an async batch's copies
   * right after it). Their arguments are committed already: a copy this process does not write is
   * written again from the log (at the next start, and by the reconciler).
   */
  private indexLater(entries: readonly IntentEntry[], afterMs: number): void {
    for (const e of entries) if (e.arguments != null) this.unindexed.push(e.id);
    // held in memory within the writer's bound; past it the oldest are left to those passes
    if (this.unindexed.length > this.maxQueued) this.unindexed.splice(0, this.unindexed.length - this.maxQueued);
    if (this.unindexed.length === 0 || this.indexTimer) return;
    // after close(), as rows are: at once
    if (this.closed) return void this.writeArgumentIndex().catch(this.onError);
    this.indexTimer = setTimeout(() => {
      this.indexTimer = null;
      this.writeArgumentIndex().catch((err) => {
        this.onError(err);
        this.indexLater([], this.flushIntervalMs);
      });
    }, afterMs);
    this.indexTimer.unref?.();
  }

  /**
   * Writes the copies waiting (see indexLater), maxBatch a statement, after the writes of copies
   * already under way (so a caller of flush() or close() finds every copy written when it returns);
   * those of a statement that fails wait for the next try.
   */
  writeArgumentIndex(): Promise<void> {
    const write = this.indexWrites.catch(() => {}).then(() => this.writeWaitingCopies());
    this.indexWrites = write;
    return write;
  }

  private async writeWaitingCopies(): Promise<void> {
    while (this.unindexed.length > 0) {
      const ids = this.unindexed.splice(0, this.maxBatch);
      try {
        await this.execute(INDEX_EXECUTIONS, [JSON.stringify(ids)], { prepare: "idemgate_audit_argument_index" });
      } catch (err) {
        this.unindexed.unshift(...ids);
        throw err;
      }
    }
  }
}

// Audit times are `timestamp(3)` holding UTC (as Prisma reads and writes them). The intent's
// parameters carry ISO instants ("…Z"), read as timestamptz; a batch carries epoch milliseconds,
// read with to_timestamp (a timestamptz, exact to the millisecond). Either is turned into UTC
// wall-clock time here: a bare cast would convert it with the session's TimeZone, shifting every
// time on a server whose TimeZone is not UTC.
const INSERT_INTENT = `
  INSERT INTO executions (id, scope, key, tool, fingerprint, token, session, caller, transport, fallback, started_at, lease_until, arguments, arguments_kept)
  VALUES ($1, $2, $3, $4, $5, $6::bigint, $7, $8, $9, $10::boolean, $11::timestamptz AT TIME ZONE 'UTC', $12::timestamptz AT TIME ZONE 'UTC', $13::jsonb, $14)`;

/** A batch's time: epoch milliseconds (a JSON number or null) as the UTC wall-clock time the columns hold. */
const utcOfMs = (value: string) => `to_timestamp((${value})::float8 / 1000) AT TIME ZONE 'UTC'`;

/**
 * The columns of an execution in a batch, in the order of intentRow then setOutcome: `r->>n` of a
 * JSON array read by jsonb_array_elements (a row shorter than the list reads NULL for the rest: an
 * intent without its outcome).
 */
const EXECUTION_VALUES = `
  r->>0, r->>1, r->>2, r->>3, r->>4, (r->>5)::bigint, r->>6, r->>7, r->>8, (r->>9)::boolean, ${utcOfMs("r->>10")}, ${utcOfMs("r->>11")},
  (r->>12)::jsonb, r->>13,
  r->>14, ${utcOfMs("r->>15")}, (r->>16)::int, (r->>17)::int, r->>18, (r->>19)::boolean, ${utcOfMs("r->>20")}, r->>21, (r->>22)::int, r->>23`;
const EXECUTION_COLUMNS = `
  id, scope, key, tool, fingerprint, token, session, caller, transport, fallback, started_at, lease_until,
  arguments, arguments_kept,
  outcome, finished_at, duration_ms, result_status, result_body, result_final, expires_at, error, answer_status, answer_body`;

/** Concurrent calls' intents, a JSON array of intentRow rows ($1): one statement, one commit. */
const INSERT_INTENTS = `
  INSERT INTO executions (${EXECUTION_COLUMNS})
  SELECT ${EXECUTION_VALUES}
  FROM jsonb_array_elements($1::jsonb) AS r`;

/**
 * A batch: outcomes of executions written before, new executions (with their outcome when it is in
 * the same batch), and suppressions, each a JSON array of rows ($2, $1, $3; each row an array of
 * its columns, see intentRow, setOutcome and suppressionRow); the data-modifying CTEs run whether
 * or not anything reads them. The insert reads the update's count, so the update runs first: an
 * execution it finishes no longer holds its key open (executions_one_open_per_key) when the key's
 * next execution is inserted.
 */
const WRITE_BATCH = `
  WITH outcomes AS (
    -- an execution released by an operator while it ran keeps its release; a result arriving
    -- after it is a late completion (it has no done record, and a retry may run it again)
    UPDATE executions AS e SET
      outcome = CASE WHEN e.outcome = 'released' THEN 'late_completion' ELSE v.outcome END,
      finished_at = v.finished_at, duration_ms = v.duration_ms,
      result_status = v.result_status, result_body = v.result_body, result_final = v.result_final,
      expires_at = v.expires_at, answer_status = v.answer_status, answer_body = v.answer_body,
      error = CASE WHEN e.outcome = 'released' THEN 'completed after its key was released (' || coalesce(e.error, '') || ')' ELSE v.error END
    FROM (
      SELECT r->>0 AS id, r->>1 AS outcome, ${utcOfMs("r->>2")} AS finished_at, (r->>3)::int AS duration_ms, (r->>4)::int AS result_status,
             r->>5 AS result_body, (r->>6)::boolean AS result_final, ${utcOfMs("r->>7")} AS expires_at, r->>8 AS error,
             (r->>9)::int AS answer_status, r->>10 AS answer_body
      FROM jsonb_array_elements($2::jsonb) AS r
    ) AS v
    WHERE e.id = v.id
      AND (e.outcome IS NULL OR (e.outcome = 'released' AND v.outcome IN ('succeeded', 'final_error', 'late_completion')))
    RETURNING 1
  ), new_executions AS (
    INSERT INTO executions (${EXECUTION_COLUMNS})
    SELECT ${EXECUTION_VALUES}
    FROM jsonb_array_elements($1::jsonb) AS r
    WHERE (SELECT count(*) FROM outcomes) >= 0
    ON CONFLICT DO NOTHING
    RETURNING 1
  )
  INSERT INTO suppressions (id, scope, key, tool, kind, fallback, gap_ms, session, caller, transport, original_session, original_execution_id, at)
  SELECT r->>0, r->>1, r->>2, r->>3, r->>4, (r->>5)::boolean, (r->>6)::int, r->>7, r->>8, r->>9, r->>10, r->>11, ${utcOfMs("r->>12")}
  FROM jsonb_array_elements($3::jsonb) AS r
  ON CONFLICT DO NOTHING`;

/** An execution row as the engine reads it: its reservation, lease and outcome. */
function priorFromRow(row: NonNullable<Awaited<ReturnType<PrismaClient["execution"]["findUnique"]>>>): PriorExecution {
  return {
    id: row.id,
    token: Number(row.token),
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
  };
}

// A key's latest execution since an instant: one index read (executions_scope_key_started_at_idx).
// The columns hold UTC wall-clock time; they are read as epoch milliseconds, which no driver or
// session time zone can shift.
const ms = (column: string) => `(extract(epoch from ${column}) * 1000)::float8 AS ${column}`;
const LATEST_EXECUTION = `
  SELECT id, token::text AS token, fingerprint, tool, session, ${ms("started_at")}, ${ms("lease_until")},
         outcome, result_status, result_body, result_final, ${ms("expires_at")}, error, ${ms("finished_at")}
  FROM executions
  WHERE scope = $1 AND key = $2 AND started_at >= ($3::timestamptz AT TIME ZONE 'UTC')
  ORDER BY started_at DESC
  LIMIT 1`;

const dateOf = (v: unknown): Date => new Date(Number(v));
const dateOrNull = (v: unknown): Date | null => (v === null || v === undefined ? null : dateOf(v));

/** A LATEST_EXECUTION row as the engine reads it. */
function priorFromSql(row: Record<string, unknown>): PriorExecution {
  return {
    id: String(row.id),
    token: Number(row.token),
    fingerprint: String(row.fingerprint),
    tool: String(row.tool),
    session: (row.session as string | null) ?? null,
    startedAt: dateOf(row.started_at),
    leaseUntil: dateOf(row.lease_until),
    outcome: (row.outcome as PriorExecution["outcome"]) ?? null,
    resultStatus: row.result_status === null || row.result_status === undefined ? null : Number(row.result_status),
    resultBody: (row.result_body as string | null) ?? null,
    resultFinal: (row.result_final as boolean | null) ?? null,
    expiresAt: dateOrNull(row.expires_at),
    error: (row.error as string | null) ?? null,
    finishedAt: dateOrNull(row.finished_at),
  };
}

/** How many columns intentRow fills: an execution's outcome follows them (setOutcome). */
const INTENT_COLUMNS = 14;

/** An intent as a batch's row: the first INTENT_COLUMNS columns of EXECUTION_COLUMNS, times in epoch ms. */
function intentRow(e: IntentEntry): unknown[] {
  return [
    e.id, e.scope, e.key, e.tool, e.fingerprint, e.token, e.session, e.caller, e.transport ?? "http", e.fallback, e.startedAt.getTime(), e.leaseUntil.getTime(),
    e.arguments ?? null, e.argumentsKept ?? null,
  ];
}

/**
 * Writes an outcome's columns into a batch's row from position `at` on (after an intent's columns,
 * or after the id of an update's row; a later outcome of the same execution overwrites them), in
 * the order WRITE_BATCH reads them. Returns the row.
 */
function setOutcome(row: unknown[], at: number, o: OutcomeEntry): unknown[] {
  row[at] = o.outcome;
  row[at + 1] = o.finishedAt.getTime();
  row[at + 2] = o.durationMs;
  row[at + 3] = o.resultStatus;
  row[at + 4] = o.resultBody;
  row[at + 5] = o.resultFinal;
  row[at + 6] = o.expiresAt?.getTime() ?? null;
  row[at + 7] = o.error;
  row[at + 8] = o.answerStatus ?? null;
  row[at + 9] = o.answerBody ?? null;
  return row;
}

/** A suppression as a batch's row, in the order WRITE_BATCH reads it. */
function suppressionRow(s: SuppressionEntry): unknown[] {
  return [s.id, s.scope, s.key, s.tool, s.kind, s.fallback, s.gapMs, s.session, s.caller, s.transport ?? "http", s.originalSession, s.originalExecutionId, s.at.getTime()];
}
