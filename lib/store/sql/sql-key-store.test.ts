import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import fc from "fast-check";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Prisma } from "@/generated/prisma/client";
import { openDatabase, type Database } from "@/lib/db/database";
import { applyMigrations, readMigrations } from "@/lib/db/migrate";
import type { KeyState, StoredResult } from "@/lib/idempotency/record";
import { beginInputs, describeKeyStoreContract } from "@/test/support/key-store-contract";
import type { BeginInput, ListQuery, StateCounts } from "@/lib/idempotency/key-store";
import { InvalidCursorError } from "@/lib/idempotency/errors";
import { CHANGE_CHANNEL, LISTENER_NAME, WAIT_LOCK_SPACE } from "./change-listener";
import { SqlKeyStore } from "./sql-key-store";

// A PostgreSQL server must be running: an unreachable server fails these tests, it never skips them.
const SERVER_URL = process.env.TEST_POSTGRES_URL ?? "postgresql://postgres@127.0.0.1:5432";

function serverUrl(database: string): string {
  const u = new URL(SERVER_URL);
  u.pathname = `/${database}`;
  return u.toString();
}

async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl("postgres"), connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

interface Opened {
  db: Database;
  store: SqlKeyStore;
  cleanup: () => Promise<void>;
  /** a PostgreSQL server's database */
  url?: string;
}

/** A database of its own on the server, dropped afterwards. */
async function openServerStore(options: { migrate?: boolean } = {}): Promise<Opened> {
  const name = `idemgate_test_sql_${randomBytes(6).toString("hex")}`;
  await adminQuery(`CREATE DATABASE ${name}`);
  let db: Database;
  try {
    db = await openDatabase({ url: serverUrl(name), poolSize: 10, migrate: options.migrate });
  } catch (err) {
    await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    throw err;
  }
  const store = new SqlKeyStore(db);
  return {
    db,
    store,
    url: serverUrl(name),
    async cleanup() {
      await store.close();
      await db.close();
      await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

/** PGlite in a temporary directory, removed afterwards. */
async function openEmbeddedStore(options: { migrate?: boolean } = {}): Promise<Opened> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-sql-store-"));
  let db: Database;
  try {
    db = await openDatabase({ dataDir: path.join(dir, "pglite"), migrate: options.migrate });
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const store = new SqlKeyStore(db);
  return {
    db,
    store,
    async cleanup() {
      await store.close();
      await db.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

const BACKENDS: [string, (options?: { migrate?: boolean }) => Promise<Opened>][] = [
  ["postgres", openServerStore],
  ["pglite", openEmbeddedStore],
];

/** the waiters' advisory locks held on the database (change-listener.ts) */
async function waitLocks(db: Database): Promise<number> {
  const rows = await db.withSession((c) =>
    c.query(
      `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objsubid = 2
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      [WAIT_LOCK_SPACE],
    ),
  );
  return Number((rows[0] as { n: number }).n);
}

for (const [name, open] of BACKENDS) {
  describeKeyStoreContract(`sql (${name})`, async () => {
    const opened = await open();
    const { db, store, url } = opened;
    if (url === undefined) {
      // PGlite: one process; another store on the same database hears its changes in-process
      const peer = new SqlKeyStore(db);
      return {
        store,
        peer,
        listening: async () => store.watchedKeys + peer.watchedKeys,
        async cleanup() {
          await peer.close();
          await opened.cleanup();
        },
      };
    }
    // another process's store: a pool of its own on the same database, so only NOTIFY reaches it
    const peerDb = await openDatabase({ url, migrate: false });
    const peer = new SqlKeyStore(peerDb);
    return {
      store,
      peer,
      listening: async () => (await waitLocks(db)) + store.watchedKeys + peer.watchedKeys,
      async cleanup() {
        await peer.close();
        await peerDb.close();
        await opened.cleanup();
      },
    };
  });
}

const T0 = 1_800_000_000_000; // an hour boundary
const HOUR = 3_600_000;
const ok: StoredResult = { status: 200, body: '{"b":1,  "a":[ 2 ]}\n', final: false };

type CountFilter = { tool?: string; scope?: string };

/** The reference: every row read and classified (what counts() did before key_counts). */
async function countRows(db: Database, nowMs: number, filter: CountFilter): Promise<StateCounts> {
  const now = BigInt(nowMs);
  const conditions: Prisma.Sql[] = [];
  if (filter.tool !== undefined) conditions.push(Prisma.sql`tool = ${filter.tool}::text`);
  if (filter.scope !== undefined) conditions.push(Prisma.sql`scope = ${filter.scope}::text`);
  const where = conditions.length > 0 ? Prisma.sql`WHERE ${Prisma.join(conditions, " AND ")}` : Prisma.empty;
  const [row] = await db.prisma.$queryRaw<Record<keyof StateCounts, bigint | number>[]>`
    SELECT
      count(*) FILTER (WHERE status = 'inflight' AND deadline_ms > ${now}::bigint) AS inflight,
      count(*) FILTER (WHERE status = 'inflight' AND deadline_ms <= ${now}::bigint) AS stuck,
      count(*) FILTER (WHERE status = 'unknown') AS unknown,
      count(*) FILTER (WHERE status = 'done' AND deadline_ms > ${now}::bigint) AS done,
      count(*) FILTER (WHERE status = 'done' AND deadline_ms <= ${now}::bigint) AS expired
    FROM idempotency_keys ${where}`;
  return {
    inflight: Number(row.inflight),
    stuck: Number(row.stuck),
    unknown: Number(row.unknown),
    done: Number(row.done),
    expired: Number(row.expired),
  };
}

/** counts() against the reference at every time and filter given, compared in one expect. */
async function expectCountsMatch(store: SqlKeyStore, db: Database, nows: number[], filters: CountFilter[]): Promise<void> {
  const actual: Record<string, StateCounts> = {};
  const expected: Record<string, StateCounts> = {};
  for (const nowMs of nows) {
    for (const filter of filters) {
      const label = `${nowMs - T0} ${JSON.stringify(filter)}`;
      actual[label] = await store.counts(nowMs, filter);
      expected[label] = await countRows(db, nowMs, filter);
    }
  }
  expect(actual).toEqual(expected);
}

/** Times around T0 where the counts' arithmetic changes: hour and half-hour boundaries, ±1 ms. */
const EDGE_TIMES = [-HOUR, -HOUR / 2, 0, HOUR / 2, HOUR].flatMap((t) => [t - 1, t, t + 1].map((d) => T0 + d));

/**
 * `rows` keys in one INSERT … SELECT over scopes `<prefix>-a|b|c` and tools bt0–bt3, deadlines T0 ± 3 h,
 * in all three stored statuses.
 */
async function insertBulk(db: Database, prefix: string, rows: number): Promise<string[]> {
  await db.prisma.$executeRaw`
    INSERT INTO idempotency_keys (scope, key, tool, fingerprint, status, token, created_at_ms, deadline_ms)
    SELECT ${prefix}::text || '-' || (ARRAY['a', 'b', 'c'])[i % 3 + 1], 'bulk-' || i, 'bt' || (i % 4), 'fp',
      CASE WHEN i % 5 = 0 THEN 'inflight' WHEN i % 7 = 0 THEN 'unknown' ELSE 'done' END,
      nextval('idempotency_token_seq'), ${BigInt(T0)}::bigint,
      ${BigInt(T0 - 3 * HOUR)}::bigint + (i::bigint * 7919) % ${BigInt(6 * HOUR)}::bigint
    FROM generate_series(1, ${rows}::int) AS i`;
  return ["a", "b", "c"].map((s) => `${prefix}-${s}`);
}

for (const [name, open] of BACKENDS) {
  describe(`SqlKeyStore on ${name}`, () => {
    let opened: Opened;
    let store: SqlKeyStore;
    let scope: string;

    beforeAll(async () => {
      opened = await open();
      store = opened.store;
    });
    afterAll(async () => {
      await opened?.cleanup();
    });

    const newScope = () => (scope = `x${randomUUID().slice(0, 8)}`);
    const input = beginInputs(() => ({ scope, nowMs: T0, key: "k", fingerprint: "fp", leaseMs: 1_000 }));
    const reserve = async (over: Partial<BeginInput> = {}) => {
      const out = await store.begin(input(over));
      if (out.kind !== "reserved") throw new Error(`expected reserved, got ${out.kind}`);
      return out;
    };

    it("reports its kind", () => {
      expect(store.kind).toBe(name);
    });

    it("keeps every field of the record and the body byte for byte", async () => {
      newScope();
      const r = await reserve({ session: "sess-1", fallback: true, executionId: "exec-1", leaseMs: 5_000 });
      expect(r.takenOver).toBeNull();
      expect(r.record).toEqual({
        scope,
        key: "k",
        tool: "payments.charge",
        fingerprint: "fp",
        status: "inflight",
        token: r.token,
        createdAtMs: T0,
        leaseUntilMs: T0 + 5_000,
        completedAtMs: null,
        expiresAtMs: null,
        result: null,
        fallback: true,
        session: "sess-1",
        executionId: "exec-1",
        outcomeNote: null,
        unknownAtMs: null,
      });
      const done = await store.complete(scope, "k", r.token, ok, 60_000, T0 + 100);
      expect(done.ok).toBe(true);
      const got = await store.get(scope, "k");
      expect(got).toEqual({
        ...r.record,
        status: "done",
        leaseUntilMs: null,
        completedAtMs: T0 + 100,
        expiresAtMs: T0 + 60_100,
        result: ok,
      });
      // completing twice is refused: the reservation is no longer inflight
      expect(await store.complete(scope, "k", r.token, ok, 60_000, T0 + 200)).toMatchObject({
        ok: false,
        reason: "stale_token",
        current: { status: "done" },
      });
    });

    it("answers mismatch before stuck, and replaces an expired record whatever its arguments", async () => {
      newScope();
      await reserve();
      expect((await store.begin(input({ fingerprint: "other", nowMs: T0 + 5_000 }))).kind).toBe("mismatch");
      expect((await store.begin(input({ fingerprint: "other", nowMs: T0 + 5_000, takeoverStuck: true }))).kind).toBe("mismatch");
      expect((await store.begin(input({ nowMs: T0 + 5_000 }))).kind).toBe("stuck");
      // a stuck record is never reused as if it had expired
      expect((await store.get(scope, "k"))?.status).toBe("inflight");

      newScope();
      const first = await reserve();
      await store.complete(scope, "k", first.token, ok, 1_000, T0);
      const again = await reserve({ nowMs: T0 + 1_000, fingerprint: "new", tool: "email.send", session: "s2" });
      expect(again.takenOver).toBeNull();
      expect(again.record).toMatchObject({
        fingerprint: "new",
        tool: "email.send",
        status: "inflight",
        createdAtMs: T0 + 1_000,
        result: null,
        completedAtMs: null,
        expiresAtMs: null,
        session: "s2",
      });
      expect((await store.get(scope, "k"))?.result).toBeNull();
    });

    it("takes over a stuck key once and reports exactly the record it replaced", async () => {
      newScope();
      const first = await reserve({ session: "old-session", executionId: "old-exec" });
      const outs = await Promise.all(
        Array.from({ length: 50 }, () => store.begin(input({ nowMs: T0 + 2_000, takeoverStuck: true, leaseMs: 60_000 }))),
      );
      const winners = outs.filter((o) => o.kind === "reserved");
      expect(winners).toHaveLength(1);
      expect(outs.filter((o) => o.kind === "conflict")).toHaveLength(49);
      const win = winners[0];
      if (win.kind !== "reserved") throw new Error("unreachable");
      expect(win.takenOver).toEqual(first.record);
      expect(win.token).toBeGreaterThan(first.token);
      // fencing: the old holder can neither complete nor abandon the new reservation
      expect(await store.complete(scope, "k", first.token, ok, 60_000, T0 + 2_100)).toMatchObject({ ok: false, reason: "stale_token" });
      expect(await store.abandon(scope, "k", first.token)).toBe(false);
      expect((await store.complete(scope, "k", win.token, ok, 60_000, T0 + 2_100)).ok).toBe(true);
    });

    it("reserves an expired key exactly once among concurrent callers", async () => {
      newScope();
      const first = await reserve();
      await store.complete(scope, "k", first.token, ok, 1_000, T0);
      const outs = await Promise.all(
        Array.from({ length: 100 }, () => store.begin(input({ nowMs: T0 + 5_000, leaseMs: 60_000 }))),
      );
      expect(outs.filter((o) => o.kind === "reserved")).toHaveLength(1);
      expect(outs.filter((o) => o.kind === "conflict")).toHaveLength(99);
    });

    it("never has two holders while reservations are taken and given back concurrently", async () => {
      newScope();
      let holders = 0;
      let maxHolders = 0;
      let reservations = 0;
      let lastToken = 0;
      const worker = async () => {
        for (let i = 0; i < 30; i++) {
          const out = await store.begin(input({ key: "hot", leaseMs: 60_000 }));
          if (out.kind === "reserved") {
            holders++;
            reservations++;
            maxHolders = Math.max(maxHolders, holders);
            // each new holder of the key fences out all earlier ones
            expect(out.token).toBeGreaterThan(lastToken);
            lastToken = out.token;
            await new Promise((r) => setTimeout(r, 1));
            holders--;
            expect(await store.abandon(scope, "hot", out.token)).toBe(true);
          } else {
            expect(out.kind).toBe("conflict");
          }
        }
      };
      await Promise.all(Array.from({ length: 20 }, worker));
      expect(maxHolders).toBe(1);
      expect(reservations).toBeGreaterThan(1);
    });

    it("refuses a completion by the holder of a released and re-reserved key", async () => {
      newScope();
      const first = await reserve();
      const released = await store.release(scope, "k", { nowMs: T0, force: true });
      expect(released).toEqual({ ok: true, before: first.record, after: null });
      const second = await reserve({ nowMs: T0 + 10 });
      expect(second.token).toBeGreaterThan(first.token);
      expect(second.takenOver).toBeNull();
      const stale = await store.complete(scope, "k", first.token, ok, 60_000, T0 + 20);
      expect(stale).toEqual({ ok: false, reason: "stale_token", current: second.record });
      expect(await store.abandon(scope, "k", first.token)).toBe(false);
      expect(await store.abandon(scope, "k", second.token)).toBe(true);
      expect(await store.complete(scope, "k", second.token, ok, 60_000, T0 + 30)).toEqual({ ok: false, reason: "absent", current: null });
    });

    it("resolves with the record as it was before", async () => {
      newScope();
      const first = await reserve({ executionId: "e-1" });
      const manual: StoredResult = { status: 201, body: "{}", final: true };
      const out = await store.resolve(scope, "k", manual, 10_000, { nowMs: T0 + 50_000 });
      expect(out).toEqual({
        ok: true,
        before: first.record,
        after: { ...first.record, status: "done", leaseUntilMs: null, completedAtMs: T0 + 50_000, expiresAtMs: T0 + 60_000, result: manual },
      });
      expect(await store.resolve(scope, "k", manual, 10_000, { nowMs: T0 })).toMatchObject({ ok: false, reason: "not_inflight" });
      expect(await store.resolve(scope, "none", manual, 10_000, { nowMs: T0 })).toEqual({ ok: false, reason: "absent", current: null });
    });

    it("pages with many rows sharing one millisecond, under every filter, without repeats or gaps", async () => {
      newScope();
      const keys = Array.from({ length: 95 }, (_, i) => `same-${i}`);
      for (let i = 0; i < keys.length; i += 25) {
        await Promise.all(keys.slice(i, i + 25).map((key, j) => store.begin(input({ key, leaseMs: 60_000, tool: (i + j) % 2 ? "a" : "b" }))));
      }
      const walk = async (q: Omit<ListQuery, "cursor" | "nowMs" | "limit">, limit: number) => {
        const seen: string[] = [];
        let cursor: string | null = null;
        for (let pages = 0; pages < 200; pages++) {
          const page = await store.list({ ...q, scope, limit, cursor, nowMs: T0 + 1 });
          expect(page.items.length).toBeLessThanOrEqual(limit);
          seen.push(...page.items.map((r) => r.key));
          cursor = page.nextCursor;
          if (!cursor) break;
        }
        return seen;
      };
      for (const q of [{}, { state: "inflight" as const }, { tool: "a" }, { state: "inflight" as const, tool: "b" }, { prefix: "same-1" }]) {
        for (const limit of [1, 7, 95, 200]) {
          const seen = await walk(q, limit);
          const expected = keys.filter(
            (k, i) =>
              (!("tool" in q) || q.tool === (i % 2 ? "a" : "b")) && (!("prefix" in q) || k.startsWith(q.prefix as string)),
          );
          expect(new Set(seen).size).toBe(seen.length);
          expect([...seen].sort()).toEqual([...expected].sort());
          // ties are ordered by key, descending, in byte order
          expect(seen).toEqual([...seen].sort().reverse());
        }
      }
      // a full last page says there is nothing more
      expect((await store.list({ scope, limit: 95, nowMs: T0 + 1 })).nextCursor).toBeNull();
    });

    it("orders by deadline within a state and by creation otherwise", async () => {
      newScope();
      await reserve({ key: "early-long", nowMs: T0, leaseMs: 90_000 });
      await reserve({ key: "late-short", nowMs: T0 + 10, leaseMs: 1_000 });
      const all = await store.list({ scope, limit: 10, nowMs: T0 + 20 });
      expect(all.items.map((r) => r.key)).toEqual(["late-short", "early-long"]);
      const inflight = await store.list({ scope, state: "inflight", limit: 10, nowMs: T0 + 20 });
      expect(inflight.items.map((r) => r.key)).toEqual(["early-long", "late-short"]);
    });

    it("matches % _ and \\ in a prefix literally", async () => {
      newScope();
      for (const key of ["a%b", "a%bc", "axb", "a_b", "aXb", "a\\b", "a\\\\b", "a"]) await reserve({ key, leaseMs: 60_000 });
      const find = async (prefix: string) => (await store.list({ scope, prefix, limit: 50, nowMs: T0 })).items.map((r) => r.key).sort();
      expect(await find("a%")).toEqual(["a%b", "a%bc"]);
      expect(await find("a_")).toEqual(["a_b"]);
      expect(await find("a\\")).toEqual(["a\\\\b", "a\\b"]);
      expect(await find("a\\b")).toEqual(["a\\b"]);
      expect(await find("A")).toEqual([]);
    });

    it("refuses a malformed cursor", async () => {
      await expect(store.list({ limit: 5, cursor: "not-a-cursor", nowMs: T0 })).rejects.toBeInstanceOf(InvalidCursorError);
      const bad = Buffer.from(JSON.stringify({ a: 1 })).toString("base64url");
      await expect(store.list({ limit: 5, cursor: bad, nowMs: T0 })).rejects.toBeInstanceOf(InvalidCursorError);
    });

    it("counts by state with tool and scope filters", async () => {
      newScope();
      await reserve({ key: "i", leaseMs: 60_000, tool: "t1" });
      await reserve({ key: "s", leaseMs: 10, tool: "t1" });
      const d = await reserve({ key: "d", tool: "t2" });
      await store.complete(scope, "d", d.token, ok, 60_000, T0);
      const e = await reserve({ key: "e", tool: "t2" });
      await store.complete(scope, "e", e.token, ok, 10, T0);
      const u = await reserve({ key: "u", tool: "t1" });
      await store.markUnknown(scope, "u", u.token, "timed out after 50 ms", T0 + 50);
      expect(await store.counts(T0 + 100, { scope })).toEqual({ inflight: 1, stuck: 1, unknown: 1, done: 1, expired: 1 });
      expect(await store.counts(T0 + 100, { scope, tool: "t1" })).toEqual({ inflight: 1, stuck: 1, unknown: 1, done: 0, expired: 0 });
      expect(await store.counts(T0 + 100, { scope, tool: "none" })).toEqual({ inflight: 0, stuck: 0, unknown: 0, done: 0, expired: 0 });
    });

    it("purges in batches until nothing expired is left, and leaves other rows alone", async () => {
      newScope();
      for (let i = 0; i < 25; i++) {
        const r = await reserve({ key: `p${i}` });
        await store.complete(scope, `p${i}`, r.token, ok, i < 23 ? 1_000 : 500_000, T0);
      }
      await reserve({ key: "inflight-old", leaseMs: 1 });
      const u = await reserve({ key: "unknown-old", leaseMs: 1 });
      await store.markUnknown(scope, "unknown-old", u.token, "timed out after 1 ms", T0 + 1);
      const purged = await store.purge(T0 + 100_000, 4);
      expect(purged).toBeGreaterThanOrEqual(23);
      const left = (await store.list({ scope, limit: 50, nowMs: T0 })).items.map((r) => r.key).sort();
      expect(left).toEqual(["inflight-old", "p23", "p24", "unknown-old"]);
      expect(await store.purge(T0 + 100_000, 4)).toBe(0);
    });

    it("counts what a scan of the rows counts, after any sequence of operations", async () => {
      const kinds = ["begin", "takeover", "retry", "complete", "unknown", "release", "resolve", "abandon", "purge"] as const;
      const op = fc.record({
        kind: fc.constantFrom(...kinds),
        scope: fc.nat(2),
        key: fc.nat(3),
        tool: fc.nat(1),
        fingerprint: fc.constantFrom("fp", "fp", "other"),
        at: fc.oneof(fc.integer({ min: -2 * HOUR, max: 2 * HOUR }), fc.constantFrom(...EDGE_TIMES.map((t) => t - T0))),
        span: fc.oneof(fc.constantFrom(1, 1_000, HOUR / 2, HOUR), fc.integer({ min: 1, max: 3 * HOUR })),
        force: fc.boolean(),
      });
      const batches = fc.array(fc.array(op, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 8 });
      const extraNows = fc.array(fc.integer({ min: -3 * HOUR, max: 3 * HOUR }), { maxLength: 4 });
      await fc.assert(
        fc.asyncProperty(batches, extraNows, async (runs, nows) => {
          const base = `x${randomUUID().slice(0, 8)}`;
          const scopes = [`${base}-a`, `${base}-b`, `${base}-c`];
          const tokens = new Map<string, number>();
          for (const batch of runs) {
            // a batch runs concurrently: counter rows take several statements' increments at once
            await Promise.all(
              batch.map(async (o) => {
                const [s, key, at] = [scopes[o.scope], `k${o.key}`, T0 + o.at];
                const token = tokens.get(`${s}/${key}`) ?? 0;
                switch (o.kind) {
                  case "begin":
                  case "takeover":
                  case "retry": {
                    const out = await store.begin(
                      input({
                        scope: s, key, tool: `t${o.tool + 1}`, fingerprint: o.fingerprint, nowMs: at, leaseMs: o.span,
                        takeoverStuck: o.kind === "takeover", retryUnknown: o.kind === "retry",
                      }),
                    );
                    if (out.kind === "reserved") tokens.set(`${s}/${key}`, out.token);
                    return;
                  }
                  case "complete":
                    return store.complete(s, key, token, ok, o.span, at);
                  case "unknown":
                    return store.markUnknown(s, key, token, "timed out", at);
                  case "release":
                    return store.release(s, key, { nowMs: at, force: o.force });
                  case "resolve":
                    return store.resolve(s, key, ok, o.span, { nowMs: at, force: o.force });
                  case "abandon":
                    return store.abandon(s, key, token);
                  case "purge":
                    return store.purge(at, 2);
                }
              }),
            );
          }
          const times = [...EDGE_TIMES, ...nows.map((t) => T0 + t), ...runs.flat().slice(0, 6).map((o) => T0 + o.at)];
          await expectCountsMatch(store, opened.db, times, [{}, { scope: scopes[0] }, { tool: "t1" }, { scope: scopes[1], tool: "t2" }]);
          // every counter row counts real rows, so none is ever below zero
          const [{ negative }] = await opened.db.prisma.$queryRaw<{ negative: bigint | number }[]>`
            SELECT (SELECT count(*) FROM key_counts WHERE n < 0) + (SELECT count(*) FROM key_deadline_counts WHERE n < 0) AS negative`;
          expect(Number(negative)).toBe(0);
        }),
        { numRuns: 15 },
      );
      // 15 runs of up to 32 statements and 17 counts each: minutes on a machine busy with the rest of npm test
    }, 180_000);

    it("keeps the counts through bulk INSERT … SELECT, UPDATE and DELETE", async () => {
      const scopes = await insertBulk(opened.db, newScope(), 5_000);
      const filters = [{}, { scope: scopes[0] }, { tool: "bt1" }, { scope: scopes[2], tool: "bt3" }];
      const times = [...EDGE_TIMES, T0 - 2 * HOUR - 17, T0 + 2 * HOUR + 17];
      await expectCountsMatch(store, opened.db, times, filters);
      await opened.db.prisma.$executeRaw`
        UPDATE idempotency_keys SET status = 'done', deadline_ms = deadline_ms + ${BigInt(HOUR)}::bigint
        WHERE scope IN (${Prisma.join(scopes)}) AND status = 'inflight' AND tool <> 'bt2'`;
      await expectCountsMatch(store, opened.db, times, filters);
      await opened.db.prisma.$executeRaw`
        UPDATE idempotency_keys SET status = 'unknown', deadline_ms = deadline_ms - ${BigInt(HOUR)}::bigint
        WHERE scope IN (${Prisma.join(scopes)}) AND status = 'inflight' AND tool = 'bt2'`;
      await expectCountsMatch(store, opened.db, times, filters);
      await opened.db.prisma.$executeRaw`DELETE FROM idempotency_keys WHERE scope = ${scopes[1]} AND deadline_ms < ${BigInt(T0)}::bigint`;
      await expectCountsMatch(store, opened.db, times, filters);
    });

    it("drops counter rows at zero when purging", async () => {
      newScope();
      const r = await reserve({ key: "gone" });
      expect(await store.abandon(scope, "gone", r.token)).toBe(true);
      await store.purge(0);
      const [{ zero }] = await opened.db.prisma.$queryRaw<{ zero: bigint | number }[]>`
        SELECT (SELECT count(*) FROM key_counts WHERE n = 0) + (SELECT count(*) FROM key_deadline_counts WHERE n = 0) AS zero`;
      expect(Number(zero)).toBe(0);
      await expectCountsMatch(store, opened.db, EDGE_TIMES, [{}, { scope }]);
    });

    // last: it empties the table the tests above share
    it("follows a TRUNCATE", async () => {
      newScope();
      await reserve();
      await opened.db.prisma.$executeRawUnsafe("TRUNCATE idempotency_keys");
      expect(await store.counts(T0)).toEqual({ inflight: 0, stuck: 0, unknown: 0, done: 0, expired: 0 });
      await reserve({ key: "after" });
      await expectCountsMatch(store, opened.db, EDGE_TIMES, [{}, { scope }]);
    });
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** polls `check` every 20 ms until it holds; throws after about 5 s */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let tries = 0; !(await check()); tries++) {
    if (tries > 250) throw new Error(`never: ${what}`);
    await sleep(20);
  }
}

describe("SqlKeyStore change notices on a PostgreSQL server", () => {
  let opened: Opened;
  let store: SqlKeyStore;
  let peerDb: Database;
  /** another process's store: a pool of its own, so only NOTIFY reaches `store` */
  let peer: SqlKeyStore;
  let scope: string;
  const newScope = () => (scope = `n${randomUUID().slice(0, 8)}`);
  const input = beginInputs(() => ({ scope, nowMs: T0, leaseMs: 60_000 }));
  const reserve = async (key: string) => {
    const out = await store.begin(input({ key }));
    if (out.kind !== "reserved") throw new Error(`expected reserved, got ${out.kind}`);
    return out.token;
  };
  const listeners = async () => {
    const [{ n }] = await opened.db.prisma.$queryRaw<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = ${LISTENER_NAME}`;
    return n;
  };

  beforeAll(async () => {
    opened = await openServerStore();
    store = opened.store;
    peerDb = await openDatabase({ url: opened.url!, migrate: false });
    peer = new SqlKeyStore(peerDb);
  });
  afterAll(async () => {
    await peer?.close();
    await peerDb?.close();
    await opened?.cleanup();
  });

  it("notifies only for keys someone waits on, from the changing statement itself", async () => {
    newScope();
    const heard: string[] = [];
    const raw = new pg.Client({ connectionString: opened.url });
    await raw.connect();
    try {
      await raw.query(`LISTEN ${CHANGE_CHANNEL}`);
      raw.on("notification", (msg) => heard.push(msg.payload ?? ""));
      const quiet = await reserve("quiet");
      const watched = await reserve("watched");
      expect((await peer.complete(scope, "quiet", quiet, ok, 60_000, T0 + 1)).ok).toBe(true); // nobody waits
      const waiting = store.waitForChange(scope, "watched", 5_000);
      await until("the waiter holds its lock", async () => (await waitLocks(opened.db)) === 1);
      expect((await peer.complete(scope, "watched", watched, ok, 60_000, T0 + 1)).ok).toBe(true);
      expect(await waiting).toBe(true);
      await until("the notice arrives", async () => heard.length > 0);
      await raw.query("SELECT 1"); // notices come in commit order: the first change's would be here by now
      expect(heard).toEqual([`${scope}\nwatched`]);
    } finally {
      await raw.end();
    }
  });

  it("waits for a change that is being committed on the key, then sees it", async () => {
    newScope();
    await reserve("busy");
    const raw = new pg.Client({ connectionString: opened.url });
    await raw.connect();
    try {
      // what a changing statement holds until its commit when nobody waits yet
      await raw.query("BEGIN");
      await raw.query("SELECT pg_advisory_xact_lock($1::int, hashtext($2::text))", [WAIT_LOCK_SPACE, `${scope}\nbusy`]);
      await raw.query(
        `UPDATE idempotency_keys SET status = 'done', lease_until_ms = NULL, completed_at_ms = $3::bigint,
           expires_at_ms = $3::bigint + 60000, deadline_ms = $3::bigint + 60000, result_status = 200, result_body = '{}'
         WHERE scope = $1 AND key = $2`,
        [scope, "busy", T0 + 1],
      );
      const waiting = store.waitForChange(scope, "busy", 5_000);
      await sleep(200); // it finds the key's lock taken and tries again
      await raw.query("COMMIT");
      expect(await waiting).toBe(true);
    } finally {
      await raw.end();
    }
    await until("no lock left", async () => (await waitLocks(opened.db)) === 0);
  });

  it("hears changes again after its listening connection drops; waits meanwhile run out", async () => {
    newScope();
    await reserve("a");
    const b = await reserve("b");
    const waiting = store.waitForChange(scope, "a", 1_000);
    await until("the waiter holds its lock", async () => (await waitLocks(opened.db)) === 1);
    const killed = await opened.db.prisma.$queryRaw<unknown[]>`
      SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = ${LISTENER_NAME}`;
    expect(killed).toHaveLength(1);
    expect(await waiting).toBe(false); // never rejects
    expect(await waitLocks(opened.db)).toBe(0); // they went with the connection
    await sleep(1_100); // the listener opens a new connection a second after losing one
    const again = store.waitForChange(scope, "b", 5_000);
    await until("the waiter holds its lock again", async () => (await waitLocks(opened.db)) === 1);
    await sleep(100);
    expect((await peer.complete(scope, "b", b, ok, 60_000, T0 + 1)).ok).toBe(true);
    expect(await again).toBe(true);
    expect(await listeners()).toBe(1);
  });

  it("opens its listening connection on the first wait, and closes it with the store", async () => {
    newScope();
    const closing = new SqlKeyStore(opened.db);
    const before = await listeners();
    await reserve("c");
    await closing.get(scope, "c");
    expect(await listeners()).toBe(before);
    const waiting = closing.waitForChange(scope, "c", 60_000);
    await until("it listens", async () => (await listeners()) === before + 1);
    await closing.close();
    expect(await waiting).toBe(false);
    expect(await closing.waitForChange(scope, "c", 60_000)).toBe(false);
    expect(closing.watchedKeys).toBe(0);
    await until("its connection is gone", async () => (await listeners()) === before);
  });
});

for (const [name, open] of BACKENDS) {
  describe(`key_counts migration on ${name}`, () => {
    it("counts the keys stored before it was applied", async () => {
      const opened = await open({ migrate: false });
      try {
        const all = await readMigrations();
        const at = all.findIndex((m) => m.name.endsWith("_key_counts"));
        expect(at).toBeGreaterThan(0);
        await opened.db.withSession((conn) => applyMigrations(conn, all.slice(0, at)));
        const scopes = await insertBulk(opened.db, "before", 3_000);
        expect(await opened.db.withSession((conn) => applyMigrations(conn, all))).toContain(all[at].name);
        await expectCountsMatch(opened.store, opened.db, EDGE_TIMES, [{}, { scope: scopes[1] }, { tool: "bt2" }]);
      } finally {
        await opened.cleanup();
      }
    });
  });
}

describe("SqlKeyStore query plans on a PostgreSQL server", () => {
  let opened: Opened;
  let store: SqlKeyStore;
  const ROWS = 20_000;
  const NOW = T0 + 10_000;

  beforeAll(async () => {
    opened = await openServerStore();
    store = opened.store;
    // 20k rows over 20 scopes and 8 tools, in all five states, spread over time
    await opened.db.prisma.$executeRaw`
      INSERT INTO idempotency_keys (scope, key, tool, fingerprint, status, token, created_at_ms, lease_until_ms,
        completed_at_ms, expires_at_ms, deadline_ms, result_status, result_body, final, fallback, outcome_note, unknown_at_ms)
      SELECT 'scope-' || (i % 20), 'key-' || i, 'tool-' || (i % 8), md5(i::text),
        CASE WHEN i % 10 < 2 THEN 'inflight' WHEN i % 10 = 2 THEN 'unknown' ELSE 'done' END, nextval('idempotency_token_seq'),
        ${BigInt(T0)}::bigint - i * 1000,
        CASE WHEN i % 10 < 3 THEN ${BigInt(NOW)}::bigint + (i % 2 * 2 - 1) * i * 10 END,
        CASE WHEN i % 10 >= 3 THEN ${BigInt(T0)}::bigint - i * 1000 END,
        CASE WHEN i % 10 >= 3 THEN ${BigInt(NOW)}::bigint + (i % 2 * 2 - 1) * i * 10 END,
        ${BigInt(NOW)}::bigint + (i % 2 * 2 - 1) * i * 10,
        CASE WHEN i % 10 >= 3 THEN 200 END,
        CASE WHEN i % 10 >= 3 THEN repeat('x', 500) END, false, false,
        CASE WHEN i % 10 = 2 THEN 'timed out after 400 ms' END,
        CASE WHEN i % 10 = 2 THEN ${BigInt(NOW)}::bigint + (i % 2 * 2 - 1) * i * 10 END
      FROM generate_series(1, ${ROWS}) AS i`;
    await opened.db.prisma.$executeRawUnsafe("ANALYZE idempotency_keys");
  });
  afterAll(async () => {
    await opened?.cleanup();
  });

  async function plan(sql: Prisma.Sql): Promise<string> {
    const rows = await opened.db.prisma.$queryRaw<{ "QUERY PLAN": string }[]>`EXPLAIN ${sql}`;
    const out = rows.map((r) => r["QUERY PLAN"]).join("\n");
    if (process.env.SHOW_PLANS) console.log(out);
    return out;
  }

  const states: KeyState[] = ["inflight", "stuck", "unknown", "done", "expired"];

  it.each(states)("lists state %s through an index", async (state) => {
    const p = await plan(store.listSql({ state, limit: 50, nowMs: NOW }));
    expect(p).not.toMatch(/Seq Scan/);
    expect(p).toMatch(/idempotency_keys_status_deadline_ms_idx/);
    const withTool = await plan(store.listSql({ state, tool: "tool-3", limit: 50, nowMs: NOW }));
    expect(withTool).not.toMatch(/Seq Scan/);
    expect(withTool).toMatch(/idempotency_keys_status_tool_deadline_ms_idx/);
  });

  it.each(["done", "unknown"] as const)("lists a later page of state %s through an index as well", async (state) => {
    const first = await store.list({ state, limit: 50, nowMs: NOW });
    expect(first.items).toHaveLength(50);
    const p = await plan(store.listSql({ state, limit: 50, nowMs: NOW, cursor: first.nextCursor }));
    expect(p).not.toMatch(/Seq Scan/);
    expect(p).toMatch(/Index Cond: .*deadline_ms <=/);
  });

  it("lists without a state, by tool, by scope and by prefix through an index", async () => {
    for (const q of [{}, { tool: "tool-1" }, { scope: "scope-7" }, { prefix: "key-1234" }]) {
      const p = await plan(store.listSql({ ...q, limit: 50, nowMs: NOW }));
      expect(p, JSON.stringify(q)).not.toMatch(/Seq Scan/);
    }
  });

  it("reads a narrow key prefix's matches through the prefix index, not the time index", async () => {
    for (const query of [{ prefix: "key-1234" }, { prefix: "key-1234", state: "done" as const }]) {
      const p = await plan(store.prefixListSql({ ...query, limit: 50, nowMs: NOW }));
      expect(p, JSON.stringify(query)).toMatch(/idempotency_keys_key_prefix_idx/);
      expect(p, JSON.stringify(query)).not.toMatch(/Seq Scan/);
    }
  });

  it("pages through a key prefix in the list order, whether its matches are few or many", async () => {
    // all keys in the list order, as the ordered scan gives them (no prefix)
    const readAll = async (s: SqlKeyStore, query: Omit<ListQuery, "limit" | "nowMs" | "cursor">) => {
      const keys: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await s.list({ ...query, limit: 1_000, nowMs: NOW, cursor });
        keys.push(...page.items.map((r) => `${r.scope}/${r.key}`));
        cursor = page.nextCursor;
      } while (cursor);
      return keys;
    };
    const everything = await readAll(store, {});
    expect(everything).toHaveLength(ROWS);
    // the same rows, read with a cap of 100 matches: "key-1" (11,111 keys) then takes the ordered scan
    const capped = new SqlKeyStore(opened.db, { prefixNarrowMatches: 100 });
    for (const prefix of ["key-1", "key-1234", "key-77"]) {
      const expected = everything.filter((k) => k.split("/")[1].startsWith(prefix));
      expect(expected.length).toBeGreaterThan(0);
      expect(await readAll(store, { prefix }), prefix).toEqual(expected);
      expect(await readAll(capped, { prefix }), `${prefix}, capped`).toEqual(expected);
    }
    expect(await readAll(store, { prefix: "nope" })).toEqual([]);
  });

  it("counts without reading every key", async () => {
    // 40k more keys with deadlines over 16 days, as retention leaves them: half an hour is a sliver
    const SPREAD = 40_000;
    await opened.db.prisma.$executeRaw`
      INSERT INTO idempotency_keys (scope, key, tool, fingerprint, status, token, created_at_ms, deadline_ms)
      SELECT 'scope-' || (i % 20), 'spread-' || i, 'tool-' || (i % 8), md5(i::text),
        CASE WHEN i % 10 < 2 THEN 'inflight' WHEN i % 10 = 2 THEN 'unknown' ELSE 'done' END, nextval('idempotency_token_seq'),
        ${BigInt(T0)}::bigint, ${BigInt(NOW - 8 * 86_400_000)}::bigint + i::bigint * ${BigInt((16 * 86_400_000) / SPREAD)}::bigint
      FROM generate_series(1, ${SPREAD}) AS i`;
    await opened.db.prisma.$executeRawUnsafe("ANALYZE idempotency_keys");
    const filters = [{}, { tool: "tool-2" }, { scope: "scope-4" }, { scope: "scope-4", tool: "tool-4" }];
    const away = [NOW - 3 * 86_400_000, NOW + 2 * 86_400_000 + 20 * 60_000];
    for (const filter of filters) {
      for (const nowMs of [NOW, ...away]) {
        const p = await plan(store.countsSql(nowMs, filter));
        expect(p, JSON.stringify(filter)).not.toMatch(/Seq Scan on idempotency_keys/);
        // around NOW every one of the 20k keys above is within the half hour, so any index may do
        if (nowMs === NOW) continue;
        const indexes = [...p.matchAll(/(?:Scan using|Bitmap Index Scan on) (idempotency_keys_\w+)/g)].map((m) => m[1]);
        expect(indexes.length, p).toBeGreaterThan(0);
        expect(indexes.filter((i) => !/^idempotency_keys_status_(tool_|scope_)?deadline_ms_idx$/.test(i)), p).toEqual([]);
      }
    }
    await expectCountsMatch(store, opened.db, [NOW, ...away, ...EDGE_TIMES], filters);
    const counts = await store.counts(NOW);
    expect(counts.inflight + counts.stuck + counts.unknown + counts.done + counts.expired).toBe(ROWS + SPREAD);
    expect(counts.inflight + counts.stuck).toBe((ROWS + SPREAD) / 5);
    expect(counts.unknown).toBe((ROWS + SPREAD) / 10);
  });


});
