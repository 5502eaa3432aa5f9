import { randomUUID } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Database } from "@/lib/db/database";
import { Engine } from "@/lib/idempotency/engine";
import { UnavailableError } from "@/lib/idempotency/errors";
import type { ToolPolicy } from "@/lib/idempotency/tool";
import { createTestPglite, createTestPostgres, POSTGRES_ADMIN_URL, type TestPostgres } from "@/test/support/databases";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";
import { PrismaAuditWriter, type AuditWriterOptions } from "./audit-writer";

/** how long a test waits for calls to reach the lock (vitest's 1 s default is short on a loaded machine) */
const WAIT = { timeout: 15_000, interval: 20 };

/**
 * The statements a writer sends, seen from the driver (or Prisma): which intents each carries, and
 * whether the database has answered it (an autocommit statement has committed when it answers).
 */
function statementLog(db: Database, through: "the driver" | "Prisma" = "the driver") {
  const statements: { text: string; done: boolean }[] = [];
  const execute = async (sql: string, params: readonly unknown[]) => {
    const statement = { text: JSON.stringify(params), done: false };
    statements.push(statement);
    const changed = through === "the driver" ? await db.execute(sql, params) : await db.prisma.$executeRawUnsafe(sql, ...params);
    statement.done = true;
    return changed;
  };
  /** the statements that carry this execution's intent */
  const carrying = (id: string) => statements.filter((s) => s.text.includes(id));
  /** how many of `ids` each statement carries, in the order they were sent */
  const batches = (ids: string[]) => statements.map((s) => ids.filter((id) => s.text.includes(id)).length).filter((n) => n > 0);
  return { statements, execute, carrying, batches };
}

const intent = (key: string, scope = "gc") => {
  const startedAt = new Date();
  return {
    id: randomUUID(), scope, key, tool: "t", fingerprint: "f", token: 3, session: null, caller: null, fallback: false,
    startedAt, leaseUntil: new Date(startedAt.getTime() + 60_000),
  };
};

describe.each([
  ["PostgreSQL", "the driver"],
  ["PostgreSQL", "Prisma"],
  ["PGlite", "the driver"],
] as const)("durable intents on %s through %s: group commit", (database, through) => {
  let handle: { db: Database; drop: () => Promise<void> };
  beforeAll(async () => {
    handle = database === "PostgreSQL" ? await createTestPostgres("group_commit") : await createTestPglite();
  });
  afterAll(() => handle?.drop());
  const newWriter = (log: ReturnType<typeof statementLog>, options: AuditWriterOptions = {}) =>
    new PrismaAuditWriter(handle.db.prisma, { mode: "durable", flushIntervalMs: 60_000, execute: log.execute, ...options });
  const rows = (ids: string[]) => handle.db.prisma.execution.count({ where: { id: { in: ids } } });

  it("writes a lone intent at once, in a commit of its own: no batching delay", async () => {
    const log = statementLog(handle.db, through);
    const writer = newWriter(log);
    const lone = intent("lone");
    const written = writer.intent(lone);
    // sent before intent() returned: nothing waited for a timer or for company
    expect(log.statements).toHaveLength(1);
    expect(log.carrying(lone.id)).toHaveLength(1);
    await written;
    expect(await handle.db.prisma.execution.findUnique({ where: { id: lone.id } })).toMatchObject({ key: "lone", outcome: null });
    expect(writer.intentStats).toEqual({ commits: 1, intents: 1, waiting: 0 });
    await writer.close();
  });

  it("writes concurrent intents in fewer commits than callers, at most maxBatch to a commit, each intent once", async () => {
    const log = statementLog(handle.db, through);
    const writer = newWriter(log, { maxBatch: 16 });
    const intents = Array.from({ length: 40 }, (_, n) => intent(`many-${n}`));
    // the first goes alone; the 39 arriving while it is written wait for it and go out together
    const calls = intents.map((i) => writer.intent(i));
    expect(log.statements).toHaveLength(1);
    expect(writer.intentStats.waiting).toBe(39);
    await Promise.all(calls);
    const ids = intents.map((i) => i.id);
    expect(log.batches(ids)).toEqual([1, 16, 16, 7]);
    expect(writer.intentStats).toEqual({ commits: 4, intents: 40, waiting: 0 });
    for (const id of ids) expect(log.carrying(id)).toHaveLength(1);
    expect(await handle.db.prisma.execution.count({ where: { id: { in: ids }, outcome: null, token: 3n } })).toBe(40);
    await writer.close();
  });

  it("lets each caller go on only once the commit carrying its intent has ended", async () => {
    const log = statementLog(handle.db, through);
    const writer = newWriter(log);
    const intents = Array.from({ length: 30 }, (_, n) => intent(`acked-${n}`));
    const early: string[] = [];
    await Promise.all(
      intents.map((i) =>
        writer.intent(i).then(() => {
          const carriers = log.carrying(i.id);
          if (carriers.length !== 1 || !carriers[0].done) early.push(i.key);
        }),
      ),
    );
    expect(early).toEqual([]);
    expect(log.batches(intents.map((i) => i.id))).toEqual([1, 29]);
    await writer.close();
  });

  it("rejects every caller of a batch the database refuses, acknowledges none of it, and writes the next batch", async () => {
    const log = statementLog(handle.db, through);
    const writer = newWriter(log);
    const refused = Array.from({ length: 12 }, (_, n) => intent(`refused-${n}`));
    await handle.db.execute(`ALTER TABLE executions RENAME TO executions_away`, []);
    let outcomes: PromiseSettledResult<void>[];
    try {
      outcomes = await Promise.allSettled(refused.map((i) => writer.intent(i)));
    } finally {
      await handle.db.execute(`ALTER TABLE executions_away RENAME TO executions`, []);
    }
    expect(log.batches(refused.map((i) => i.id))).toEqual([1, 11]);
    expect(outcomes.map((o) => o.status)).toEqual(refused.map(() => "rejected"));
    for (const o of outcomes) expect(String((o as PromiseRejectedResult).reason)).toMatch(/executions/);
    expect(await rows(refused.map((i) => i.id))).toBe(0);

    const after = Array.from({ length: 5 }, (_, n) => intent(`after-${n}`));
    await Promise.all(after.map((i) => writer.intent(i)));
    expect(await rows(after.map((i) => i.id))).toBe(5);
    await writer.close();
  });

  it("refuses only the intent that meets an open execution of its key; the others of its batch are written", async () => {
    const log = statementLog(handle.db, through);
    const writer = newWriter(log);
    const first = intent("taken");
    await writer.intent(first);
    const ahead = intent("ahead");
    const second = intent("taken");
    const others = [intent("free-1"), intent("free-2"), intent("free-3")];
    // `ahead` is written alone; the second execution of "taken" shares the next batch with the others
    const [aheadDone, secondDone, ...othersDone] = await Promise.allSettled([ahead, second, ...others].map((i) => writer.intent(i)));
    expect(log.batches([second, ...others].map((i) => i.id))[0]).toBe(4);
    expect(aheadDone.status).toBe("fulfilled");
    expect(secondDone).toMatchObject({ status: "rejected", reason: { name: "OpenExecutionError" } });
    expect(othersDone.map((o) => o.status)).toEqual(["fulfilled", "fulfilled", "fulfilled"]);
    expect(await rows([ahead, ...others].map((i) => i.id))).toBe(4);
    expect(await rows([second.id])).toBe(0);

    // once the first execution's outcome is queued, the key's next execution goes in (the queue first)
    writer.outcome({ id: first.id, outcome: "failed", finishedAt: new Date(), durationMs: 1, resultStatus: 500, resultBody: null, resultFinal: null, expiresAt: null, error: "nothing happened" });
    const third = intent("taken");
    await Promise.all([intent("ahead-2"), third, intent("free-4")].map((i) => writer.intent(i)));
    expect(await handle.db.prisma.execution.findUnique({ where: { id: first.id } })).toMatchObject({ outcome: "failed" });
    expect(await handle.db.prisma.execution.findUnique({ where: { id: third.id } })).toMatchObject({ outcome: null });
    await writer.close();
  });
});

describe("durable intents on PostgreSQL: a commit under way", () => {
  let server: TestPostgres;
  let locker: pg.Client;
  beforeAll(async () => {
    server = await createTestPostgres("group_commit_lock");
    locker = new pg.Client({ connectionString: server.url });
    await locker.connect();
  });
  afterAll(async () => {
    await locker?.end();
    await server?.drop();
  });

  it("acknowledges nothing while the commit carrying an intent waits; intents arriving meanwhile go in one commit after it", async () => {
    const log = statementLog(server.db);
    const writer = new PrismaAuditWriter(server.db.prisma, { mode: "durable", flushIntervalMs: 60_000, execute: log.execute });
    const database = new URL(server.url).pathname.slice(1);
    await locker.query("BEGIN");
    await locker.query("LOCK TABLE executions IN EXCLUSIVE MODE");
    const acknowledged: string[] = [];
    const lone = intent("held-lone");
    const later = Array.from({ length: 20 }, (_, n) => intent(`held-${n}`));
    const calls: Promise<void>[] = [];
    try {
      calls.push(writer.intent(lone).then(() => void acknowledged.push(lone.id)));
      // the lone intent's statement is in the database, waiting for the table
      await vi.waitFor(async () => {
        const { rows } = await locker.query(
          // any backend of this database waiting for a lock: the intent's connection may still
          // show its previous statement while the new one waits for the table in its parse step
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
          [database],
        );
        expect(rows[0].n).toBe(1);
      }, WAIT);
      for (const i of later) calls.push(writer.intent(i).then(() => void acknowledged.push(i.id)));
      // nobody goes on, and the later intents wait in the writer rather than in statements of their own
      await new Promise((resolve) => setImmediate(resolve));
      expect(acknowledged).toEqual([]);
      expect(log.statements).toHaveLength(1);
      expect(writer.intentStats.waiting).toBe(20);
      const { rows } = await locker.query(`SELECT count(*)::int AS n FROM executions`);
      expect(rows[0].n).toBe(0);
    } finally {
      await locker.query("COMMIT");
    }
    await Promise.all(calls);
    expect(acknowledged).toHaveLength(21);
    expect(log.batches([lone, ...later].map((i) => i.id))).toEqual([1, 20]);
    expect(await server.db.prisma.execution.count({ where: { key: { startsWith: "held-" } } })).toBe(21);
    await writer.close();
  });
});

const tool: ToolPolicy = { name: "gc.write", kind: "write", ttlMs: 86_400_000, leaseMs: 60_000, stuckPolicy: "block", fallbackTtlMs: null, dedupes: false };

describe.each(["redis", "pglite"] as const)("engine with durable audit, key store %s: group commit", (kind) => {
  let env: StoreUnderTest;
  let writer: PrismaAuditWriter;
  let engine: Engine;
  beforeAll(async () => {
    env = await openTestStore(kind);
    writer = new PrismaAuditWriter(env.db.prisma, { mode: "durable", execute: env.db.execute });
    engine = new Engine({ store: env.store, audit: writer });
  });
  afterAll(async () => {
    await writer?.close();
    await env?.cleanup();
  });

  it("runs no tool before its intent is in the log, with concurrent first executions sharing commits", async () => {
    const before = writer.intentStats;
    const unlogged: string[] = [];
    const run = async (_args: unknown, ctx: { executionId: string | null }) => {
      // read through Prisma, outside the writer: what a crash right now would leave behind
      const row = await env.db.prisma.execution.findUnique({ where: { id: ctx.executionId! } });
      if (!row) unlogged.push(ctx.executionId!);
      return { body: { ok: true } };
    };
    const results = await Promise.all(Array.from({ length: 30 }, (_, n) => engine.invoke(tool, run, { scope: "gc", key: `first-${n}`, args: { n } })));
    expect(results.map((r) => r.kind)).toEqual(results.map(() => "executed"));
    expect(unlogged).toEqual([]);
    const after = writer.intentStats;
    expect(after.intents - before.intents).toBe(30);
    expect(after.commits - before.commits).toBeLessThanOrEqual(30);
  });

  it("fails every call of a refused batch closed: nothing runs, and the keys are free for a retry", async () => {
    await env.db.execute(`CREATE FUNCTION gc_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the audit log refuses writes'; END $$`, []);
    await env.db.execute(`CREATE TRIGGER gc_refuse BEFORE INSERT ON executions FOR EACH STATEMENT EXECUTE FUNCTION gc_refuse()`, []);
    let ran = 0;
    const run = async () => {
      ran++;
      return { body: { ok: true } };
    };
    const keys = Array.from({ length: 10 }, (_, n) => `refused-${n}`);
    const before = writer.intentStats;
    let refused: PromiseSettledResult<unknown>[];
    try {
      refused = await Promise.allSettled(keys.map((key) => engine.invoke(tool, run, { scope: "gc", key, args: { key } })));
    } finally {
      await env.db.execute(`DROP TRIGGER gc_refuse ON executions`, []);
      await env.db.execute(`DROP FUNCTION gc_refuse()`, []);
    }
    expect(writer.intentStats.intents - before.intents).toBe(10);
    for (const r of refused) {
      expect(r.status).toBe("rejected");
      const reason = (r as PromiseRejectedResult).reason;
      expect(reason).toBeInstanceOf(UnavailableError);
      expect(reason).toMatchObject({ component: "audit_log" });
    }
    expect(ran).toBe(0);
    const retried = await Promise.all(keys.map((key) => engine.invoke(tool, run, { scope: "gc", key, args: { key } })));
    expect(retried.map((r) => r.kind)).toEqual(keys.map(() => "executed"));
    expect(ran).toBe(10);
  });
});

describe("engine with durable audit on PostgreSQL, a commit under way", () => {
  let env: StoreUnderTest;
  let locker: pg.Client;
  beforeAll(async () => {
    env = await openTestStore("redis");
  });
  afterAll(async () => {
    await locker?.end();
    await env?.cleanup();
  });

  it("writes the intents of calls arriving during a commit in one commit after it: two commits for thirty calls", async () => {
    const writer = new PrismaAuditWriter(env.db.prisma, { mode: "durable", flushIntervalMs: 60_000, execute: env.db.execute });
    const engine = new Engine({ store: env.store, audit: writer });
    // the audit database of this store, through a connection of the test's own
    const url = new URL(POSTGRES_ADMIN_URL);
    url.pathname = new URL(env.db.location).pathname;
    locker = new pg.Client({ connectionString: url.toString() });
    await locker.connect();
    let ran = 0;
    const run = async () => {
      ran++;
      return { body: { ok: true } };
    };
    await locker.query("BEGIN");
    await locker.query("LOCK TABLE executions IN EXCLUSIVE MODE");
    let calls: Promise<unknown>[];
    try {
      calls = Array.from({ length: 30 }, (_, n) => engine.invoke(tool, run, { scope: "gc-held", key: `k-${n}`, args: { n } }));
      // one intent is being written (held by the lock); the other 29 wait for its commit to end
      await vi.waitFor(() => expect(writer.intentStats).toEqual({ commits: 1, intents: 1, waiting: 29 }), WAIT);
      expect(ran).toBe(0);
    } finally {
      await locker.query("COMMIT");
    }
    await Promise.all(calls);
    expect(ran).toBe(30);
    expect(writer.intentStats).toEqual({ commits: 2, intents: 30, waiting: 0 });
    await writer.close();
  });
});
