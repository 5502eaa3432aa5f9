import { EventEmitter } from "node:events";
import { Prisma } from "@/generated/prisma/client";
import type { Database } from "@/lib/db/database";
import { currentBucket, expiryBucket, type ResultBytesCounter } from "@/lib/idempotency/scope-result-limit";
import type { KeyRecord, StoredStatus } from "@/lib/idempotency/record";
import type {
  BeginInput,
  BeginOutcome,
  CompleteOutcome,
  KeyStore,
  ListPage,
  ListQuery,
  OperatorGuard,
  OperatorOutcome,
  StateCounts,
} from "@/lib/idempotency/key-store";
import {
  decideBegin,
  holderPatch,
  holderRefusal,
  operatorPatch,
  operatorRefusal,
  type HolderChange,
  type OperatorChange,
  type RecordPatch,
} from "@/lib/idempotency/transitions";
import { ChangeWaiters, type Watch } from "../change-waiters";
import { RuleChanges } from "../rule-changes";
import { ALL, columnsOf, ms, num, patchAssignments, prefixed, reservationValues, reserved, sameVersion, toRecord, type Row } from "./key-rows";
import { CHANGE_CHANNEL, PgChangeListener, WAIT_LOCK_SPACE } from "./change-listener";
import { countsSql, encodeCursor, listSql, pageSize, prefixListSql } from "./key-queries";

export { decodeCursor, encodeCursor } from "./key-queries";

/**
 * The key store on PostgreSQL (a server, or PGlite embedded): one row per (scope, key) in
 * `idempotency_keys`. The rules (lib/idempotency/transitions.ts) decide every change from the row
 * as read; the change is then one statement, applied only to that version of the row (or, for a
 * holder, to the reservation it holds), so it needs no transaction and behaves the same through a
 * pool (server) or one shared connection (PGlite).
 *
 * `deadline_ms` is `lease_until_ms` while inflight, `unknown_at_ms` while unknown and
 * `expires_at_ms` once done, so the five derived states are ranges of the (status, deadline_ms)
 * index (unknown: all of its status). Triggers keep counts of the rows (key_counts,
 * key_deadline_counts: migration 20261129030000_key_counts) for `counts`.
 *
 * Changes for waiters (waitForChange): after every statement that changes a record's state the
 * store tells the other stores of the same Database object in this process (an in-process
 * emitter: all PGlite needs, one process owns its data directory); on a PostgreSQL server the
 * statement itself also notifies other processes that wait on that key (see change-listener.ts).
 * Purge is not announced: it deletes expired done records, on which no call waits.
 */

export interface SqlKeyStoreOptions {
  /** close the database with the store; off by default because the audit log shares it */
  closeDatabase?: boolean;
  /**
   * a key-prefix page sorts at most this many matches itself (prefixListSql); a broader prefix
   * takes the ordered scan (default 20,000)
   */
  prefixNarrowMatches?: number;
}

const PREFIX_NARROW_MATCHES = 20_000;
/** The first key of begin's per-key advisory locks (the second is a hash of scope and key). */
const BEGIN_LOCK_SPACE = 0x1de3;

/** A begin that keeps losing races is a bug, not load: give up loudly instead of spinning. */
const MAX_BEGIN_ATTEMPTS = 50;
/** An operator's action that keeps finding the key changed between its two statements: the same. */
const MAX_OPERATOR_ATTEMPTS = 10;
const DEFAULT_PURGE_BATCH = 1000;

/** per Database object: the changes made through any of its stores in this process (`scope \n key`) */
const localChanges = new WeakMap<Database, EventEmitter>();

function changesIn(db: Database): EventEmitter {
  let emitter = localChanges.get(db);
  if (!emitter) {
    emitter = new EventEmitter();
    emitter.setMaxListeners(0);
    localChanges.set(db, emitter);
  }
  return emitter;
}

const changeId = (scope: string, key: string) => `${scope}\n${key}`;

/**
 * A column for a statement's changed rows (`alias` has scope and key): on a PostgreSQL server it
 * notifies the processes waiting on the row's key (they hold the shared lock the statement fails
 * to take exclusively), and is true then; false otherwise. `when`: only for rows it holds for.
 */
function announceColumn(alias: string, when: Prisma.Sql = Prisma.sql`true`): Prisma.Sql {
  const a = Prisma.raw(alias);
  return Prisma.sql`CASE WHEN NOT coalesce(${when}, false) THEN false
      WHEN pg_try_advisory_xact_lock(${WAIT_LOCK_SPACE}::int, hashtext(${a}.scope || E'\n' || ${a}.key)) THEN false
      ELSE (SELECT true FROM pg_notify(${CHANGE_CHANNEL}::text, ${a}.scope || E'\n' || ${a}.key)) END AS announced`;
}

export class SqlKeyStore extends RuleChanges implements KeyStore {
  readonly kind: "postgres" | "pglite";
  private readonly prisma: Database["prisma"];
  private readonly waiters = new ChangeWaiters((id) => this.watch(id));
  /** this store's ear on the in-process changes, from the first wait to close() */
  private onLocalChange: ((id: string) => void) | null = null;
  /** PostgreSQL server: the connection that hears other processes' changes, opened on the first wait */
  private listener: PgChangeListener | null = null;
  private closed = false;
  private get prefixNarrowMatches(): number {
    return this.options.prefixNarrowMatches ?? PREFIX_NARROW_MATCHES;
  }

  constructor(
    private readonly db: Database,
    private readonly options: SqlKeyStoreOptions = {},
  ) {
    super();
    this.kind = db.kind;
    this.prisma = db.prisma;
  }

  /** The notifying column of a changing statement's result rows; nothing on PGlite (one process). */
  private announce(alias: string, when?: Prisma.Sql): Prisma.Sql {
    return this.kind === "postgres" ? Prisma.sql`, ${announceColumn(alias, when)}` : Prisma.empty;
  }

  /** Tells this process's waiters (of any store of this Database) that the record changed. */
  private changed(scope: string, key: string): void {
    changesIn(this.db).emit("change", changeId(scope, key));
  }

  /**
   * Each attempt: one statement reads the existing row (`prev`) and inserts a reservation only if
   * the key has no row; the rules (decideBegin) then answer from `prev`. A row they let this call
   * replace (expired, or stuck or unknown and taken over) is replaced by a second statement, only
   * while it is still the version `prev` saw (replaceIfUnchanged), so `takenOver` is exactly the
   * record that was replaced. When the key changed in between, the next attempt sees the newer row.
   *
   * Each statement draws its token after a per-key advisory lock, held to the end of the
   * statement, so reservations of one key draw their tokens in the order they are made: a
   * statement that drew its token and then waited could otherwise insert after a later holder had
   * come and gone, with a smaller token (fencing tokens must increase with every new holder).
   */
  async begin(input: BeginInput): Promise<BeginOutcome> {
    for (let attempt = 0; attempt < MAX_BEGIN_ATTEMPTS; attempt++) {
      const rows = await this.prisma.$queryRaw<Record<string, unknown>[]>`
        WITH key_lock AS MATERIALIZED (
          SELECT pg_advisory_xact_lock(${BEGIN_LOCK_SPACE}::int, hashtext(${input.scope}::text || E'\n' || ${input.key}::text))
        ), prev AS (
          SELECT ${ALL} FROM idempotency_keys WHERE scope = ${input.scope}::text AND key = ${input.key}::text
        ), ins AS (
          INSERT INTO idempotency_keys (scope, key, tool, fingerprint, status, token, created_at_ms,
            lease_until_ms, completed_at_ms, expires_at_ms, deadline_ms, result_status, result_body, final,
            fallback, session, execution_id, outcome_note, unknown_at_ms)
          SELECT ${input.scope}::text, ${input.key}::text, ${reservationValues(input)}
          FROM key_lock
          ON CONFLICT (scope, key) DO NOTHING
          RETURNING ${ALL}
        )
        SELECT ${columnsOf("ins")}, ${columnsOf("prev", "p_")}
        FROM (SELECT 1) AS one LEFT JOIN ins ON true LEFT JOIN prev ON true`;
      const row = rows[0];
      // inserted: the key had no row (prev may have seen one that was deleted since)
      if (row.scope !== null && row.scope !== undefined) return reserved(toRecord(row as unknown as Row, true), null);
      const prevRow = prefixed(row, "p_");
      // a row inserted after this statement's snapshot: the next attempt sees it
      if (!prevRow) continue;
      const prev = toRecord(prevRow, true);
      const decision = decideBegin(prev, input, input.nowMs);
      if (decision.kind !== "reserve") return { kind: decision.kind, record: prev };
      const record = await this.replaceIfUnchanged(input, prev);
      if (record) return reserved(record, decision.takenOver);
      // it changed under us: look again
    }
    throw new Error(`begin on ${input.scope}/${input.key} did not settle after ${MAX_BEGIN_ATTEMPTS} attempts`);
  }

  /** A new reservation in place of `prev`, if the key still holds that version of it; null otherwise. */
  private async replaceIfUnchanged(input: BeginInput, prev: KeyRecord): Promise<KeyRecord | null> {
    const rows = await this.prisma.$queryRaw<Row[]>`
      WITH key_lock AS MATERIALIZED (
        SELECT pg_advisory_xact_lock(${BEGIN_LOCK_SPACE}::int, hashtext(${input.scope}::text || E'\n' || ${input.key}::text))
      ), next AS MATERIALIZED (
        SELECT nextval('idempotency_token_seq') AS token FROM key_lock
      ), changed AS (
        UPDATE idempotency_keys AS k SET (tool, fingerprint, status, token, created_at_ms, lease_until_ms, completed_at_ms,
          expires_at_ms, deadline_ms, result_status, result_body, final, fallback, session, execution_id, outcome_note,
          unknown_at_ms) = ROW(${reservationValues(input, Prisma.sql`next.token`)})
        FROM next
        WHERE ${sameVersion(prev, "k")} AND next.token > k.token
        RETURNING ${columnsOf("k")}
      )
      SELECT changed.*${this.announce("changed")} FROM changed`;
    if (rows.length === 0) return null;
    this.changed(input.scope, input.key);
    return toRecord(rows[0], true);
  }

  /**
   * The holder's own change of its reservation: one statement, applied only to the version the
   * holder holds (inflight under its token: what holderRefusal allows), announced to waiters. When
   * it changed nothing, the rules say why from the key as it is now.
   */
  protected async changeHeld(scope: string, key: string, token: number, change: HolderChange): Promise<CompleteOutcome> {
    const patch = holderPatch(change);
    const held = Prisma.sql`scope = ${scope}::text AND key = ${key}::text AND status = 'inflight' AND token = ${BigInt(token)}::bigint`;
    const rows = await this.changeRow(held, patch);
    if (rows.length > 0) {
      this.changed(scope, key);
      return { ok: true, record: toRecord(rows[0], true) };
    }
    const current = await this.get(scope, key);
    return { ok: false, reason: holderRefusal(current, token) ?? "stale_token", current };
  }

  /**
   * An operator's decision: the key is read, the rules decide (operatorRefusal), and the change
   * applies only to the version read; a key changed in between is read again.
   */
  protected async changeByOperator(scope: string, key: string, guard: OperatorGuard, change: OperatorChange): Promise<OperatorOutcome> {
    const patch = operatorPatch(change, guard.nowMs);
    for (let attempt = 0; attempt < MAX_OPERATOR_ATTEMPTS; attempt++) {
      const before = await this.get(scope, key);
      const refusal = operatorRefusal(before, guard);
      if (refusal) return { ok: false, reason: refusal, current: before };
      const rows = await this.changeRow(sameVersion(before!), patch);
      if (rows.length > 0) {
        this.changed(scope, key);
        return { ok: true, before: before!, after: patch === null ? null : toRecord(rows[0], true) };
      }
    }
    throw new Error(`${change.kind} of ${scope}/${key} did not settle after ${MAX_OPERATOR_ATTEMPTS} attempts`);
  }

  /** Applies the rules' patch (null: delete) to the row `where` finds, announced to waiters; the changed row, if any. */
  private changeRow(where: Prisma.Sql, patch: RecordPatch | null): Promise<Row[]> {
    const change =
      patch === null
        ? Prisma.sql`DELETE FROM idempotency_keys WHERE ${where} RETURNING ${ALL}`
        : Prisma.sql`UPDATE idempotency_keys SET ${patchAssignments(patch)} WHERE ${where} RETURNING ${ALL}`;
    return this.prisma.$queryRaw<Row[]>`WITH changed AS (${change}) SELECT changed.*${this.announce("changed")} FROM changed`;
  }

  async get(scope: string, key: string): Promise<KeyRecord | null> {
    const rows = await this.prisma.$queryRaw<Row[]>`
      SELECT ${ALL} FROM idempotency_keys WHERE scope = ${scope}::text AND key = ${key}::text`;
    return rows.length > 0 ? toRecord(rows[0], true) : null;
  }

  async list(query: ListQuery): Promise<ListPage> {
    const limit = pageSize(query.limit);
    type ListRow = Row & { sort_value: bigint | number | string };
    let rows: ListRow[] | null = null;
    if (query.prefix) {
      const narrow = await this.prisma.$queryRaw<(ListRow & { matched: bigint | number })[]>(this.prefixListSql(query));
      // more matches than the narrow plan reads: the prefix is broad, and the ordered scan finds a page sooner
      if (narrow.length === 0 || num(narrow[0].matched) <= this.prefixNarrowMatches) rows = narrow;
    }
    rows ??= await this.prisma.$queryRaw<ListRow[]>(this.listSql(query));
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    const nextCursor =
      rows.length > limit && last ? encodeCursor({ sort: num(last.sort_value), scope: last.scope, key: last.key }) : null;
    return { items: page.map((r) => toRecord(r, false)), nextCursor };
  }

  /** The list query (key-queries.ts), exposed so tests can EXPLAIN exactly what runs. */
  listSql(query: ListQuery): Prisma.Sql {
    return listSql(query);
  }

  /** A key-prefix page read from the prefix's matches (key-queries.ts), exposed for EXPLAIN in tests. */
  prefixListSql(query: ListQuery): Prisma.Sql {
    return prefixListSql(query, this.prefixNarrowMatches);
  }

  async counts(nowMs: number, filter: { tool?: string; scope?: string } = {}): Promise<StateCounts> {
    type Part = "total" | "from_cut" | "due_from_cut" | "live_before_cut";
    const rows = await this.prisma.$queryRaw<({ status: string } & Record<Part, bigint | number | string>)[]>(
      this.countsSql(nowMs, filter),
    );
    const split = (status: StoredStatus) => {
      const row = rows.find((r) => r.status === status)!;
      const total = num(row.total);
      const due = total - num(row.from_cut) + num(row.due_from_cut) - num(row.live_before_cut);
      return { live: total - due, due };
    };
    const inflight = split("inflight");
    const done = split("done");
    // unknown is one state whatever its deadline: its total, never split
    const unknown = num(rows.find((r) => r.status === "unknown")!.total);
    return { inflight: inflight.live, stuck: inflight.due, unknown, done: done.live, expired: done.due };
  }

  /** The counts query (key-queries.ts), exposed for EXPLAIN in tests. */
  countsSql(nowMs: number, filter: { tool?: string; scope?: string } = {}): Prisma.Sql {
    return countsSql(nowMs, filter);
  }

  /** deletes done rows only: inflight and unknown keys stay whatever their age */
  readonly resultBytes: ResultBytesCounter = {
    add: async (additions) => {
      // one statement; a (scope, hour) pair twice in it is summed first (ON CONFLICT updates a row once)
      const sums = new Map<string, { scope: string; hour: number; bytes: number }>();
      for (const a of additions) {
        const hour = expiryBucket(a.expiresAtMs);
        const pair = `${hour} ${a.scope}`;
        const entry = sums.get(pair);
        if (entry) entry.bytes += a.bytes;
        else sums.set(pair, { scope: a.scope, hour, bytes: a.bytes });
      }
      if (sums.size === 0) return;
      // rows locked in one order by every process: two additions over the same scopes in the
      // orders their completions came would otherwise deadlock (and one would be lost)
      const rows = [...sums.values()].sort((a, b) => (a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : a.hour - b.hour));
      await this.prisma.$executeRaw`
        INSERT INTO scope_result_bytes (scope, expires_hour, bytes)
        SELECT * FROM unnest(${rows.map((r) => r.scope)}::text[], ${rows.map((r) => String(r.hour))}::bigint[], ${rows.map((r) => String(r.bytes))}::bigint[])
        ON CONFLICT (scope, expires_hour) DO UPDATE SET bytes = scope_result_bytes.bytes + EXCLUDED.bytes`;
    },
    usage: async (scope, nowMs) => {
      const rows = await this.prisma.$queryRaw<{ bytes: bigint | number | null }[]>`
        SELECT sum(bytes) AS bytes FROM scope_result_bytes WHERE scope = ${scope} AND expires_hour >= ${currentBucket(nowMs)}::bigint`;
      return Number(rows[0]?.bytes ?? 0);
    },
    all: async (nowMs) => {
      const rows = await this.prisma.$queryRaw<{ scope: string; bytes: bigint | number }[]>`
        SELECT scope, sum(bytes) AS bytes FROM scope_result_bytes WHERE expires_hour >= ${currentBucket(nowMs)}::bigint GROUP BY scope HAVING sum(bytes) > 0`;
      return new Map(rows.map((r) => [r.scope, Number(r.bytes)]));
    },
  };

  async purge(olderThanMs: number, batch = DEFAULT_PURGE_BATCH): Promise<number> {
    const size = Math.max(1, Math.trunc(batch));
    const before = ms(olderThanMs);
    let total = 0;
    for (;;) {
      // the outer conditions are re-checked on a row replaced (by a new begin) since the sub-select
      const deleted = await this.prisma.$executeRaw`
        DELETE FROM idempotency_keys
        WHERE ctid IN (
          SELECT ctid FROM idempotency_keys WHERE status = 'done' AND deadline_ms < ${before}::bigint LIMIT ${size}
        ) AND status = 'done' AND deadline_ms < ${before}::bigint`;
      total += deleted;
      if (deleted < size) break;
    }
    // the hours of stored result bytes that have passed count nothing any more
    await this.prisma.$executeRaw`DELETE FROM scope_result_bytes WHERE expires_hour < ${currentBucket(Date.now())}::bigint`;
    // counter rows at zero count nothing; rows a writer holds are left for the next purge
    for (const table of ["key_counts", "key_deadline_counts"]) {
      const t = Prisma.raw(table);
      await this.prisma.$executeRaw`
        DELETE FROM ${t} WHERE ctid IN (SELECT ctid FROM ${t} WHERE n = 0 FOR UPDATE SKIP LOCKED) AND n = 0`;
    }
    return total;
  }

  async ping(): Promise<void> {
    await this.prisma.$queryRaw`SELECT 1`;
  }

  async waitForChange(scope: string, key: string, timeoutMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.closed) return false;
    if (!this.onLocalChange) {
      const onLocalChange = (id: string) => this.waiters.notify(id);
      changesIn(this.db).on("change", onLocalChange);
      this.onLocalChange = onLocalChange;
    }
    return this.waiters.wait(changeId(scope, key), timeoutMs, signal, async () => {
      const rows = await this.prisma.$queryRaw<{ status: string }[]>`
        SELECT status FROM idempotency_keys WHERE scope = ${scope}::text AND key = ${key}::text`;
      return rows[0]?.status === "inflight";
    });
  }

  /** Keys waited on now (for tests and status). */
  get watchedKeys(): number {
    return this.waiters.watching;
  }

  private watch(id: string): Watch {
    // PGlite, or a Database that cannot open a connection of its own: this process's changes only
    if (this.kind !== "postgres" || !this.db.newConnection) return { ready: Promise.resolve(), stop() {} };
    this.listener ??= new PgChangeListener(
      () => this.db.newConnection!(),
      (id) => this.waiters.notify(id),
      () => this.waiters.forgetWatches(),
    );
    return this.listener.watch(id);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.waiters.close();
    if (this.onLocalChange) changesIn(this.db).off("change", this.onLocalChange);
    this.onLocalChange = null;
    await this.listener?.close();
    this.listener = null;
    if (this.options.closeDatabase) await this.db.close();
  }

}
