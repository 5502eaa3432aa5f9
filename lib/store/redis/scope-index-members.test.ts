// Upgrade safety of the members of a scope's own indexes. Earlier versions wrote them as the shared
// indexes' members ("scope \n key", lex "key \n scope \n createdAtMs"); this one writes them without
// the scope ("key", lex "key \n createdAtMs"). A deployment's Redis holds both forms after the
// upgrade: lists of a scope must read both, completely and in order, also across pages whose cursor
// stops on either form; every change must leave no entry of either form behind; and rebuild-indexes
// rewrites everything in the current form. On a real Redis.
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STORED_STATUSES, stateOf, type KeyRecord, type KeyState, type StoredResult } from "@/lib/idempotency/record";
import type { KeyStore, ListQuery } from "@/lib/idempotency/key-store";
import { beginInputs } from "@/test/support/key-store-contract";
import { deleteRedisPrefix } from "@/test/support/stores";
import { BUCKETS, KeySpace, bucketOf } from "./key-names";
import { RedisKeyStore } from "./redis-key-store";

const REDIS_URL = process.env.REDIS_TEST_URL ?? "redis://127.0.0.1:6379";
const T0 = 1_800_000_000_000;
const ok: StoredResult = { status: 200, body: '{"ok":true}', final: false };
const N = 400;
const keyOf = (i: number) => `k-${String(i).padStart(3, "0")}`;
const KEYS = Array.from({ length: N }, (_, i) => keyOf(i));

type Form = "old" | "new";
/** a record's entries in its scope's own indexes: status, created, lex */
interface Entries {
  status: { index: string; score: number; member: string; form: Form }[];
  created: { score: number; member: string; form: Form }[];
  lex: { createdAtMs: number; form: Form }[];
}

describe("members of a scope's own indexes, written by this version and by earlier ones", () => {
  const prefix = `idgtest:${randomUUID().slice(0, 8)}`;
  const scope = `m${randomUUID().slice(0, 8)}`;
  const other = `${scope}o`;
  const ks = new KeySpace(prefix);
  let redis: Redis;
  /** the store's own connection, which carries its scripts as commands */
  let storeRedis: Redis;
  let store: RedisKeyStore;
  const input = beginInputs(() => ({ scope, nowMs: T0 }));
  const tokens = new Map<string, number>();

  const records = async (): Promise<Map<string, KeyRecord>> => {
    const out = new Map<string, KeyRecord>();
    for (const key of KEYS) {
      const r = await store.get(scope, key);
      if (r) out.set(key, r);
    }
    return out;
  };

  /** every member of the scope's own indexes, by the key it names; fails on a member of another form or scope */
  const scopeEntries = async (): Promise<Map<string, Entries>> => {
    const out = new Map<string, Entries>();
    const of = (key: string) => {
      let e = out.get(key);
      if (!e) out.set(key, (e = { status: [], created: [], lex: [] }));
      return e;
    };
    const scoreMember = (member: string): { key: string; form: Form } => {
      if (!member.includes("\n")) return { key: member, form: "new" };
      const [s, key, ...rest] = member.split("\n");
      expect([s, rest]).toEqual([scope, []]);
      return { key, form: "old" };
    };
    for (const b of BUCKETS) {
      for (const status of STORED_STATUSES) {
        const index = ks.scopeStatus(b, scope, status);
        const flat = await redis.zrange(index, "0", "-1", "WITHSCORES");
        for (let i = 0; i < flat.length; i += 2) {
          const { key, form } = scoreMember(flat[i]);
          of(key).status.push({ index, score: Number(flat[i + 1]), member: flat[i], form });
        }
      }
      const created = await redis.zrange(ks.scopeCreated(b, scope), "0", "-1", "WITHSCORES");
      for (let i = 0; i < created.length; i += 2) {
        const { key, form } = scoreMember(created[i]);
        of(key).created.push({ score: Number(created[i + 1]), member: created[i], form });
      }
      for (const member of await redis.zrange(ks.scopeLex(b, scope), "0", "-1")) {
        const parts = member.split("\n");
        if (parts.length === 3) expect(parts[1]).toBe(scope);
        else expect(parts).toHaveLength(2);
        of(parts[0]).lex.push({ createdAtMs: Number(parts.at(-1)), form: parts.length === 3 ? "old" : "new" });
      }
    }
    return out;
  };

  const deadlineOf = (r: KeyRecord) => ({ inflight: r.leaseUntilMs, unknown: r.unknownAtMs, done: r.expiresAtMs })[r.status]!;

  /**
   * Each record is in exactly one entry (of either form) of its status' index, of the created and
   * of the lex index, scored as the record says, with created and lex in one form; no entry names
   * a record that is gone. Answers each record's entries.
   */
  const checkEntries = async (): Promise<{ recs: Map<string, KeyRecord>; entries: Map<string, Entries> }> => {
    const recs = await records();
    const entries = await scopeEntries();
    for (const key of entries.keys()) expect(recs.has(key), `entries of ${key}, which is gone`).toBe(true);
    for (const [key, r] of recs) {
      const e = entries.get(key);
      expect(e, key).toBeDefined();
      expect(e!.status.map((s) => [s.index, s.score]), key).toEqual([[ks.scopeStatus(bucketOf(scope, key), scope, r.status), deadlineOf(r)]]);
      expect(e!.created.map((c) => c.score), key).toEqual([r.createdAtMs]);
      expect(e!.lex.map((l) => [l.createdAtMs, l.form]), key).toEqual([[r.createdAtMs, e!.created[0].form]]);
    }
    return { recs, entries };
  };

  const listAll = async (query: Omit<ListQuery, "cursor" | "nowMs">, nowMs: number): Promise<string[]> => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await store.list({ ...query, nowMs, cursor });
      expect(page.items.length).toBeLessThanOrEqual(query.limit);
      for (const r of page.items) {
        expect(r.scope).toBe(scope);
        seen.push(r.key);
      }
      cursor = page.nextCursor;
      if (++pages > 5_000) throw new Error("pagination does not end");
    } while (cursor);
    return seen;
  };

  /** score descending, then the member as the index holds it, descending (byte order) */
  const ordered = (rows: { key: string; score: number; member: string }[]) =>
    [...rows].sort((a, b) => b.score - a.score || (a.member < b.member ? 1 : a.member > b.member ? -1 : 0)).map((r) => r.key);

  /** Every list of the scope (time, each state, key prefix, tool, state and prefix) is complete and in order; counts agree. */
  const checkLists = async (nowMs: number) => {
    const { recs, entries } = await checkEntries();
    const all = [...recs.values()];
    const byCreated = all.map((r) => ({ key: r.key, score: r.createdAtMs, member: entries.get(r.key)!.created[0].member }));
    const byDeadline = (state: KeyState) =>
      all.filter((r) => stateOf(r, nowMs) === state).map((r) => ({ key: r.key, score: deadlineOf(r), member: entries.get(r.key)!.status[0].member }));
    for (const limit of [1, 7, 50]) expect(await listAll({ scope, limit }, nowMs), `limit ${limit}`).toEqual(ordered(byCreated));
    for (const state of ["inflight", "stuck", "unknown", "done", "expired"] as const) {
      expect(await listAll({ scope, state, limit: 6 }, nowMs), state).toEqual(ordered(byDeadline(state)));
    }
    // the lex index (few matches per bucket), and, with a budget of 20 entries per bucket, some
    // buckets read through the lex index and others through the created one within one listing
    const prefixed = (p: string) => ordered(byCreated.filter((r) => r.key.startsWith(p)));
    expect(await listAll({ scope, prefix: "k-1", limit: 4 }, nowMs)).toEqual(prefixed("k-1"));
    expect(await listAll({ scope, prefix: "k-", limit: 1 }, nowMs)).toEqual(prefixed("k-"));
    expect(await listAll({ scope, tool: "email.send", limit: 9 }, nowMs)).toEqual(
      ordered(byCreated.filter((r) => recs.get(r.key)!.tool === "email.send")),
    );
    expect(await listAll({ scope, state: "done", prefix: "k-2", limit: 3 }, nowMs)).toEqual(
      ordered(byDeadline("done").filter((r) => r.key.startsWith("k-2"))),
    );
    const counts = { inflight: 0, stuck: 0, unknown: 0, done: 0, expired: 0 };
    for (const r of all) counts[stateOf(r, nowMs)]++;
    expect(await store.counts(nowMs, { scope })).toEqual(counts);
    return { recs, entries };
  };

  beforeAll(async () => {
    redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    storeRedis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    store = new RedisKeyStore(storeRedis, { prefix });
    // four creation times, so every page's ties hold both forms; five states
    await Promise.all(
      KEYS.map(async (key, i) => {
        const tool = i % 3 === 0 ? "email.send" : "tickets.create";
        const out = await store.begin(input({ key, tool, nowMs: T0 + (i % 4), leaseMs: i % 5 === 4 ? 100 : 60_000 }));
        if (out.kind !== "reserved") throw new Error(`expected reserved, got ${out.kind}`);
        tokens.set(key, out.token);
        if (i % 5 === 0 || i % 5 === 1) await store.complete(scope, key, out.token, ok, i % 5 === 0 ? 60_000 : 100, T0 + 10);
        if (i % 5 === 2) await store.markUnknown(scope, key, out.token, "timed out", T0 + 20);
      }),
    );
    // another scope's records: in other indexes, never listed here
    await Promise.all(KEYS.slice(0, 40).map((_, i) => store.begin(input({ scope: other, key: `o-${i}` }))));
    // every odd key as the previous version's scripts wrote it: its scope's own entries named the scope
    const { recs } = await checkEntries();
    for (const [i, key] of KEYS.entries()) {
      if (i % 2 === 0) continue;
      const r = recs.get(key)!;
      const b = bucketOf(scope, key);
      await redis.zrem(ks.scopeStatus(b, scope, r.status), key);
      await redis.zadd(ks.scopeStatus(b, scope, r.status), deadlineOf(r), `${scope}\n${key}`);
      await redis.zrem(ks.scopeCreated(b, scope), key);
      await redis.zadd(ks.scopeCreated(b, scope), r.createdAtMs, `${scope}\n${key}`);
      await redis.zrem(ks.scopeLex(b, scope), `${key}\n${r.createdAtMs}`);
      await redis.zadd(ks.scopeLex(b, scope), 0, `${key}\n${scope}\n${r.createdAtMs}`);
    }
  }, 60_000);

  afterAll(async () => {
    await deleteRedisPrefix(prefix);
    await store?.close();
    redis?.disconnect();
  });

  it("lists a scope holding both forms completely and in order, page after page", async () => {
    const { entries } = await checkLists(T0 + 1_000);
    for (const [i, key] of KEYS.entries()) {
      const e = entries.get(key)!;
      expect([e.status[0].form, e.created[0].form, e.lex[0].form], key).toEqual(Array(3).fill(i % 2 ? "old" : "new"));
    }
  }, 120_000);

  it("leaves no entry of either form behind when records change state, are deleted, replaced or purged", async () => {
    const now = T0 + 2_000;
    const touched = new Set<string>();
    const gone = new Set<string>();
    await Promise.all(
      KEYS.map(async (key, i) => {
        const token = tokens.get(key)!;
        const held = i % 5 === 3;
        if (held && i < 100) await store.complete(scope, key, token, ok, 60_000, now);
        else if (held && i < 200) await store.markUnknown(scope, key, token, "the service answered 502", now);
        else if (held && i < 300) await store.extendLease(scope, key, token, T0 + 500_000);
        else if (held && i < 340) expect(await store.abandon(scope, key, token)).toBe(true);
        else if (i % 5 === 2 && i < 200) expect((await store.resolve(scope, key, ok, 60_000, { nowMs: now, force: true })).ok).toBe(true);
        else if (i % 5 === 4 && i < 100) expect((await store.release(scope, key, { nowMs: now, force: true })).ok).toBe(true);
        else if (i % 5 === 4 && i < 200) expect((await store.begin(input({ key, nowMs: now, takeoverStuck: true }))).kind).toBe("reserved");
        else if (i % 5 === 1 && i < 100) expect((await store.begin(input({ key, nowMs: now }))).kind).toBe("reserved");
        else return;
        touched.add(key);
        if ((held && i >= 300) || (i % 5 === 4 && i < 100)) gone.add(key);
      }),
    );
    // the expired records not replaced above
    expect(await store.purge(now)).toBeGreaterThanOrEqual(60);
    for (const [i, key] of KEYS.entries()) if (i % 5 === 1 && i >= 100) gone.add(key);

    const { recs, entries } = await checkLists(now);
    for (const key of gone) expect(recs.has(key), key).toBe(false);
    expect(recs.size).toBe(N - gone.size);
    for (const [i, key] of KEYS.entries()) {
      if (gone.has(key)) continue;
      const e = entries.get(key)!;
      const replaced = recs.get(key)!.createdAtMs === now;
      // a changed status is written in the current form; created and lex change only with the record
      expect(e.status[0].form, key).toBe(touched.has(key) || i % 2 === 0 ? "new" : "old");
      expect(e.created[0].form, key).toBe(replaced || i % 2 === 0 ? "new" : "old");
    }
    // nothing of the deleted records is left in any index of the store (every sorted set under its prefix)
    let cursor = "0";
    let indexes = 0;
    do {
      const [next, batch] = await redis.scan(cursor, "MATCH", `{${prefix}:*`, "COUNT", 1000);
      cursor = next;
      for (const index of batch) {
        if ((await redis.type(index)) !== "zset") continue;
        indexes++;
        for (const member of await redis.zrange(index, "0", "-1")) {
          const named = member.split("\n").filter((part) => gone.has(part));
          expect(named, `${index}: ${JSON.stringify(member)}`).toEqual([]);
        }
      }
    } while (cursor !== "0");
    expect(indexes).toBeGreaterThanOrEqual(BUCKETS.length * 3);
  }, 120_000);

  it("the page script reading a scope's own index skips an old-form member that names another scope", async () => {
    // what no version writes, but a scope's index must never answer with: another tenant's key
    const b = 5;
    const intruder = `zz-${randomUUID()}`;
    const page = (index: string, mode: "score" | "lex", prefixFilter: string) =>
      (storeRedis as unknown as { idgPage: (...args: string[]) => Promise<unknown[]> }).idgPage(
        index, mode, "+inf", "-inf", "", "", "1000", "10000", scope, prefixFilter, "", ks.base(b),
      );
    await redis.zadd(ks.scopeCreated(b, scope), T0 + 999_999, `${other}\n${intruder}`);
    await redis.zadd(ks.scopeStatus(b, scope, "done"), T0 + 999_999, `${other}\n${intruder}`);
    await redis.zadd(ks.scopeLex(b, scope), 0, `${intruder}\n${other}\n${T0 + 999_999}`);
    try {
      const listed = async (index: string, mode: "score" | "lex", prefixFilter: string) => {
        const reply = (await page(index, mode, prefixFilter)) as string[];
        return reply.slice(3).filter((_, i) => i % 2 === 0);
      };
      for (const [index, mode, prefixFilter] of [
        [ks.scopeCreated(b, scope), "score", ""],
        [ks.scopeCreated(b, scope), "score", "zz-"],
        [ks.scopeStatus(b, scope, "done"), "score", ""],
        [ks.scopeLex(b, scope), "lex", "zz-"],
      ] as const) {
        const members = await listed(index, mode, prefixFilter);
        expect(members.filter((m) => m.includes(intruder)), `${index} ${mode} "${prefixFilter}"`).toEqual([]);
      }
      // the scope's own members are still answered beside it
      expect((await listed(ks.scopeCreated(b, scope), "score", "")).length).toBeGreaterThan(0);
    } finally {
      await redis.zrem(ks.scopeCreated(b, scope), `${other}\n${intruder}`);
      await redis.zrem(ks.scopeStatus(b, scope, "done"), `${other}\n${intruder}`);
      await redis.zrem(ks.scopeLex(b, scope), `${intruder}\n${other}\n${T0 + 999_999}`);
    }
  });

  it("a list across scopes refuses indexes holding the earlier form, naming the rebuild, instead of paging out of order", async () => {
    // beside the current form an earlier entry sorts out of the merged order among its score's
    // keys, where a merge could stop on it page after page
    for (const query of [{}, { state: "done" as const }, { prefix: "k-1" }]) {
      await expect(store.list({ ...query, limit: 5, nowMs: T0 + 2_000 }), JSON.stringify(query)).rejects.toThrow(/rebuild-indexes/);
    }
  });

  it("rebuild-indexes rewrites every entry in the current form, and the lists stay as they were", async () => {
    const now = T0 + 2_000;
    const before = await listAll({ scope, limit: 50 }, now);
    await store.rebuildIndexes();
    const { recs, entries } = await checkLists(now);
    for (const [key, e] of entries) expect([e.status[0].form, e.created[0].form, e.lex[0].form], key).toEqual(["new", "new", "new"]);
    // the same records; within a millisecond now all by key (checkLists checked the order)
    expect((await listAll({ scope, limit: 50 }, now)).sort()).toEqual(before.sort());
    // and a list across scopes holds both scopes' keys once each, in order
    const across: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await store.list({ limit: 7, cursor, nowMs: now });
      across.push(...page.items.map((r) => `${r.scope}\n${r.key}`));
      cursor = page.nextCursor;
    } while (cursor && across.length < 10 * N);
    const others = await Promise.all(KEYS.slice(0, 40).map(async (_, i) => (await store.get(other, `o-${i}`))!));
    const expected = [...[...recs.values()], ...others]
      .map((r) => ({ member: `${r.scope}\n${r.key}`, score: r.createdAtMs }))
      .sort((a, b) => b.score - a.score || (a.member < b.member ? 1 : a.member > b.member ? -1 : 0))
      .map((e) => e.member);
    expect(across).toEqual(expected);
  }, 120_000);
});
