import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEY_STATES, STORED_STATUSES, stateOf, type KeyState, type StoredResult } from "@/lib/idempotency/record";
import { beginInputs, describeKeyStoreContract } from "@/test/support/key-store-contract";
import type { BeginInput, KeyStore, ListQuery } from "@/lib/idempotency/key-store";
import { InvalidCursorError } from "@/lib/idempotency/errors";
import { UnsupportedFilterError } from "./errors";
import { BUCKETS, BUCKET_COUNT, KeySpace, bucketOf, hashTagOf, memberOf } from "./key-names";
import { RedisKeyStore } from "./redis-key-store";
import { RedisProcess } from "@/test/support/redis-process";

const REDIS_URL = process.env.REDIS_TEST_URL ?? "redis://127.0.0.1:6379";
const T0 = 1_800_000_000_000;
const ok: StoredResult = { status: 200, body: '{"ok":true}', final: false };

function client(url = REDIS_URL): Redis {
  // fail, never skip, when Redis is not there
  const redis = new Redis(url, { enableAutoPipelining: true, maxRetriesPerRequest: 1 });
  redis.on("error", () => {}); // commands reject with the error; no unhandled-event noise
  return redis;
}

// A missing Redis makes this suite fail (not skip): this test fails on its own, the others in
// their beforeAll.
it("reaches Redis at REDIS_TEST_URL (default 127.0.0.1:6379)", async () => {
  const redis = client();
  try {
    await expect(redis.ping()).resolves.toBe("PONG");
  } finally {
    redis.disconnect();
  }
});

async function keysWithPrefix(redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await redis.scan(cursor, "MATCH", `{${prefix}:*`, "COUNT", 1000);
    found.push(...batch);
    cursor = next;
  } while (cursor !== "0");
  return found;
}

async function deletePrefix(redis: Redis, prefix: string): Promise<void> {
  const keys = await keysWithPrefix(redis, prefix);
  for (let i = 0; i < keys.length; i += 500) await redis.del(...keys.slice(i, i + 500));
}

async function openStore(prefix: string, url = REDIS_URL): Promise<{ store: RedisKeyStore; redis: Redis }> {
  const redis = client(url);
  await redis.ping();
  return { store: new RedisKeyStore(redis, { prefix }), redis };
}

describeKeyStoreContract("redis", async () => {
  const prefix = `idgtest:${randomUUID().slice(0, 8)}`;
  const { store, redis } = await openStore(prefix);
  // another process's store: a client of its own on the same prefix
  const { store: peer } = await openStore(prefix);
  return {
    store: store as KeyStore,
    peer: peer as KeyStore,
    // the change channels Redis has subscribers for (KeySpace.changeChannel), and the stores' own count
    listening: async () =>
      (await redis.pubsub("CHANNELS", `{${prefix}:*}:chg:*`)).length + store.watchedChannels + peer.watchedChannels,
    cleanup: async () => {
      await deletePrefix(redis, prefix);
      await peer.close();
      await store.close();
    },
  };
});

describe("RedisKeyStore", () => {
  const prefix = `idgtest:${randomUUID().slice(0, 8)}`;
  let store: RedisKeyStore;
  let redis: Redis;
  let scope: string;
  const newScope = () => (scope = `r${randomUUID().slice(0, 8)}`);
  const input = beginInputs(() => ({ scope, nowMs: T0 }));
  const reserve = async (over: Partial<BeginInput> = {}) => {
    const out = await store.begin(input(over));
    if (out.kind !== "reserved") throw new Error(`expected reserved, got ${out.kind}`);
    return out;
  };
  /** the names of the commands the store's connection sends until `stop()` */
  const recordCommands = () => {
    const sent: string[] = [];
    const original = redis.sendCommand.bind(redis);
    redis.sendCommand = ((command: { name: string }, ...rest: unknown[]) => {
      sent.push(command.name);
      return (original as (...a: unknown[]) => unknown)(command, ...rest);
    }) as typeof redis.sendCommand;
    return { sent, stop: () => void (redis.sendCommand = original) };
  };
  /** every page of a list, in order; `on` another store than the suite's */
  const listAll = async (query: Omit<Parameters<KeyStore["list"]>[0], "cursor">, on: KeyStore = store) => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await on.list({ ...query, cursor });
      expect(page.items.length).toBeLessThanOrEqual(query.limit);
      seen.push(...page.items.map((r) => memberOf(r.scope, r.key)));
      cursor = page.nextCursor;
      if (++pages > 5_000) throw new Error("pagination does not end");
    } while (cursor);
    return seen;
  };
  /** expected list order: score descending, then member descending (byte order) */
  const ordered = (entries: { member: string; score: number }[]) =>
    [...entries].sort((a, b) => b.score - a.score || (a.member < b.member ? 1 : a.member > b.member ? -1 : 0)).map((e) => e.member);

  beforeAll(async () => {
    ({ store, redis } = await openStore(prefix));
  });
  afterAll(async () => {
    await deletePrefix(redis, prefix);
    await store.close();
  });

  it("pages exactly through hundreds of records created in one millisecond, across all buckets", async () => {
    newScope();
    const other = `${scope}x`;
    const keys = Array.from({ length: 400 }, (_, i) => `tie-${i}`);
    await Promise.all(keys.map((key) => store.begin(input({ key }))));
    await Promise.all(keys.slice(0, 100).map((key) => store.begin(input({ key, scope: other }))));
    expect(new Set(keys.map((k) => bucketOf(scope, k))).size).toBe(BUCKET_COUNT);

    const expected = ordered(keys.map((key) => ({ member: memberOf(scope, key), score: T0 })));
    for (const limit of [1, 7, 50, 1_000]) {
      expect(await listAll({ scope, limit, nowMs: T0 })).toEqual(expected);
    }
    // the state index is scored by deadline: all leases tie too
    expect(await listAll({ scope, state: "inflight", limit: 13, nowMs: T0 })).toEqual(expected);
    // the tool index with a scope filter read within a budget: short pages, still exact
    expect(await listAll({ scope, tool: "payments.charge", limit: 3, nowMs: T0 })).toEqual(expected);
    // prefix search: lex index, and the fallback when a bucket has more matches than the budget
    const prefixed = expected.filter((m) => m.startsWith(`${scope}\ntie-1`));
    expect(await listAll({ scope, prefix: "tie-1", limit: 50, nowMs: T0 })).toEqual(prefixed);
    expect(await listAll({ scope, prefix: "tie-1", limit: 1, nowMs: T0 })).toEqual(prefixed);
    expect(await listAll({ scope, prefix: "tie-", limit: 1, nowMs: T0 })).toEqual(expected);
  });

  it("lists across scopes exactly once each and in order, merging every scope's own indexes, and counts and purges them", async () => {
    // a store of its own: a list across scopes holds every scope under its prefix
    const own = `idgtest:${randomUUID().slice(0, 8)}`;
    const { store: across, redis: raw } = await openStore(own);
    try {
      // scopes that are prefixes of one another ("\n" sorts below every scope character), and
      // the same keys in several scopes
      const scopes = ["a", "a-", "a0", "ab", "b", "Z"].map((s) => `x${s}`);
      const expected: { member: string; created: number; deadline: number; state: KeyState; tool: string }[] = [];
      await Promise.all(
        scopes.flatMap((scope, s) =>
          Array.from({ length: 40 }, async (_, i) => {
            const key = `k-${i % 25}-${s % 2 ? "odd" : "even"}${i >= 25 ? "x" : ""}`;
            const created = T0 + (i % 3); // ties within and across scopes
            const tool = i % 2 ? "email.send" : "payments.charge";
            const r = await across.begin({ ...input({ key, tool, nowMs: created }), scope, leaseMs: i % 7 === 0 ? 1 : 60_000 });
            if (r.kind !== "reserved") throw new Error(r.kind);
            let state: KeyState = i % 7 === 0 ? "stuck" : "inflight";
            let deadline = r.record.leaseUntilMs!;
            if (i % 4 === 1) {
              const done = await across.complete(scope, key, r.token, ok, i % 8 === 1 ? 10 : 60_000, created);
              if (!done.ok) throw new Error(done.reason);
              [state, deadline] = [i % 8 === 1 ? "expired" : "done", done.record.expiresAtMs!];
            } else if (i % 4 === 2) {
              const held = await across.markUnknown(scope, key, r.token, "the service answered 502", created + 1);
              if (!held.ok) throw new Error(held.reason);
              [state, deadline] = ["unknown", held.record.unknownAtMs!];
            }
            expected.push({ member: memberOf(scope, key), created, deadline, state, tool });
          }),
        ),
      );
      const now = T0 + 1_000;
      const walk = (query: Omit<ListQuery, "cursor" | "nowMs">) => listAll({ ...query, nowMs: now }, across);
      const byCreated = ordered(expected.map((e) => ({ member: e.member, score: e.created })));
      expect(byCreated).toHaveLength(240);
      for (const limit of [1, 7, 50, 1_000]) expect(await walk({ limit }), `limit ${limit}`).toEqual(byCreated);
      for (const state of KEY_STATES) {
        const want = ordered(expected.filter((e) => e.state === state).map((e) => ({ member: e.member, score: e.deadline })));
        expect(want.length, state).toBeGreaterThan(0);
        expect(await walk({ state, limit: 6 }), state).toEqual(want);
      }
      const charges = byCreated.filter((m) => expected.find((e) => e.member === m)!.tool === "payments.charge");
      expect(await walk({ tool: "payments.charge", limit: 5 })).toEqual(charges);
      const unknownEmails = ordered(expected.filter((e) => e.state === "unknown" && e.tool === "email.send").map((e) => ({ member: e.member, score: e.deadline })));
      expect(await walk({ state: "unknown", tool: "email.send", limit: 4 })).toEqual(unknownEmails);
      // prefix search: the lex indexes, and the time index where a bucket has more matches than the budget
      for (const [prefix, limit] of [["k-1", 3], ["k-1", 50], ["k-", 1]] as const) {
        expect(await walk({ prefix, limit }), `${prefix} ${limit}`).toEqual(byCreated.filter((m) => m.split("\n")[1].startsWith(prefix)));
      }
      // a cursor of a tenant's list is no position across scopes
      const tenantPage = await across.list({ scope: scopes[0], limit: 1, nowMs: now });
      await expect(across.list({ limit: 1, cursor: tenantPage.nextCursor, nowMs: now })).rejects.toBeInstanceOf(InvalidCursorError);

      const counts = await across.counts(now);
      for (const state of KEY_STATES) expect(counts[state], state).toBe(expected.filter((e) => e.state === state).length);
      const emailCounts = await across.counts(now, { tool: "email.send" });
      for (const state of KEY_STATES) expect(emailCounts[state], state).toBe(expected.filter((e) => e.state === state && e.tool === "email.send").length);

      // purge reaches every scope; a scope whose last record in a bucket goes leaves the bucket's list
      const expired = expected.filter((e) => e.state === "expired");
      expect(await across.purge(now)).toBe(expired.length);
      for (const e of expired) expect(await across.get(...(e.member.split("\n") as [string, string]))).toBeNull();
      expect(await walk({ limit: 50 })).toEqual(byCreated.filter((m) => !expired.some((e) => e.member === m)));
      const ks = new KeySpace(own);
      for (const b of BUCKETS) {
        const listed = (await raw.zrange(ks.scopes(b), "0", "-1")).sort();
        const holding = scopes.filter((scope) => expected.some((e) => e.state !== "expired" && e.member.startsWith(`${scope}\n`) && bucketOf(scope, e.member.split("\n")[1]) === b));
        expect(listed, `bucket ${b}`).toEqual(holding.sort());
      }
    } finally {
      await deletePrefix(raw, own);
      await across.close();
    }
  });

  it("lists across scopes written to at different times exactly, reading a scope once the merge reaches its newest record", async () => {
    const own = `idgtest:${randomUUID().slice(0, 8)}`;
    const { store: across, redis: raw } = await openStore(own);
    try {
      // scope j's records from T0 + 5·j on, three per millisecond, the last one tied with the
      // next scope's first: a scope's bound meets the entries of others, tied on score, and the
      // older scope's name sorts after the newer one's, so its tied entries come first
      const entries: { member: string; score: number }[] = [];
      await Promise.all(
        // more scopes per bucket than the script reads of its scopes index at once (16)
        Array.from({ length: 40 }, (_, j) =>
          Array.from({ length: 16 }, async (_, i) => {
            const scope = `t${99 - j}`;
            const key = `k-${i}`;
            const nowMs = T0 + 5 * j + Math.floor(i / 3);
            const r = await across.begin({ ...input({ key, nowMs }), scope });
            if (r.kind !== "reserved") throw new Error(r.kind);
            entries.push({ member: memberOf(scope, key), score: nowMs });
          }),
        ).flat(),
      );
      // a record deleted leaves its scope's bound above what the scope holds: still exact
      await across.release("t60", "k-15", { nowMs: T0, force: true });
      const expected = ordered(entries.filter((e) => e.member !== memberOf("t60", "k-15")));
      for (const limit of [1, 2, 7, 50]) expect(await listAll({ limit, nowMs: T0 + 100 }, across), `limit ${limit}`).toEqual(expected);
      // each bucket's scopes are scored by the newest record each has had there
      const ks = new KeySpace(own);
      for (const b of BUCKETS) {
        const flat = await raw.zrange(ks.scopes(b), "0", "-1", "WITHSCORES");
        for (let i = 0; i < flat.length; i += 2) {
          const newest = Math.max(...entries.filter((e) => e.member.startsWith(`${flat[i]}\n`) && bucketOf(flat[i], e.member.split("\n")[1]) === b).map((e) => e.score));
          expect(Number(flat[i + 1]), `${flat[i]} in bucket ${b}`).toBe(newest);
        }
      }
    } finally {
      await deletePrefix(raw, own);
      await across.close();
    }
  });

  it("orders newest first with a cursor that survives the deletion of its record", async () => {
    newScope();
    const entries = await Promise.all(
      Array.from({ length: 120 }, async (_, i) => {
        const key = `del-${i}`;
        const nowMs = T0 + (i % 5); // five groups of ties
        await store.begin(input({ key, nowMs }));
        return { member: memberOf(scope, key), score: nowMs };
      }),
    );
    const expected = ordered(entries);
    const first = await store.list({ scope, limit: 10, nowMs: T0 });
    expect(first.items.map((r) => memberOf(r.scope, r.key))).toEqual(expected.slice(0, 10));
    // remove the record the cursor points at, and one right after it
    const last = first.items[9];
    await store.release(scope, last.key, { nowMs: T0, force: true });
    await store.release(scope, expected[10].split("\n")[1], { nowMs: T0, force: true });
    const second = await store.list({ scope, limit: 10, cursor: first.nextCursor, nowMs: T0 });
    expect(second.items.map((r) => memberOf(r.scope, r.key))).toEqual(expected.slice(11, 21));
  });

  it("rejects a cursor it did not produce", async () => {
    await expect(store.list({ limit: 5, cursor: "not-a-cursor", nowMs: T0 })).rejects.toBeInstanceOf(InvalidCursorError);
  });

  it("lists and counts each state by deadline, per scope", async () => {
    newScope();
    await reserve({ key: "i", leaseMs: 60_000 });
    await reserve({ key: "s", leaseMs: 10 });
    const d = await reserve({ key: "d" });
    await store.complete(scope, "d", d.token, ok, 60_000, T0);
    const e = await reserve({ key: "e" });
    await store.complete(scope, "e", e.token, ok, 5, T0);
    const u = await reserve({ key: "u" });
    await store.markUnknown(scope, "u", u.token, "timed out after 50 ms", T0 + 50);
    const now = T0 + 100;
    expect(await store.counts(now, { scope })).toEqual({ inflight: 1, stuck: 1, unknown: 1, done: 1, expired: 1 });
    for (const [state, key] of [["inflight", "i"], ["stuck", "s"], ["unknown", "u"], ["done", "d"], ["expired", "e"]] as const) {
      const page = await store.list({ scope, state, limit: 10, nowMs: now });
      expect(page.items.map((r) => r.key)).toEqual([key]);
      expect(stateOf(page.items[0], now)).toBe(state);
    }
    await expect(store.counts(now, { scope, tool: "x" })).rejects.toBeInstanceOf(UnsupportedFilterError);
  });

  it("keeps every key of a record and its indexes under the record's bucket tag, named alike in Lua and TypeScript", async () => {
    newScope();
    const pairs = Array.from({ length: 64 }, (_, i) => ({ key: `tag-${i}`, tool: i % 2 ? "email.send" : "tickets.create" }));
    for (const { key, tool } of pairs) {
      const r = await reserve({ key, tool });
      const i = Number(key.slice(4));
      if (i % 3 === 0) await store.complete(scope, key, r.token, ok, 60_000, T0);
      if (i % 3 === 1) await store.markUnknown(scope, key, r.token, "the service answered 502", T0 + 1);
    }
    const ks = new KeySpace(prefix);
    for (const { key, tool } of pairs) {
      const bucket = bucketOf(scope, key);
      const tag = `${prefix}:${bucket}`;
      const record = await store.get(scope, key);
      expect(record).not.toBeNull();
      const status = record!.status;
      const all = [ks.record(scope, key), ks.token(bucket), ks.scopes(bucket), ...ks.indexesOf(scope, key, tool, status)];
      expect(all.map(hashTagOf)).toEqual(all.map(() => tag));
      // the scripts wrote exactly the entries key-names.ts names (index, score, member), the status
      // ones scored by the status' deadline, and the record is in no other status' indexes
      const deadline = { inflight: record!.leaseUntilMs, unknown: record!.unknownAtMs, done: record!.expiresAtMs }[status]!;
      const entries = ks.entriesOf({ scope, key, tool, status, createdAtMs: record!.createdAtMs, deadlineMs: deadline });
      expect(entries.map(([index]) => index)).toEqual(ks.indexesOf(scope, key, tool, status));
      for (const [index, score, member] of entries) expect(await redis.zscore(index, member), index).toBe(String(score));
      // the bucket lists the scope: lists across scopes read its indexes
      expect(Number(await redis.zscore(ks.scopes(bucket), scope))).toBeGreaterThanOrEqual(record!.createdAtMs);
      expect(await redis.zscore(ks.scopeStatus(bucket, scope, status), key)).toBe(String(deadline));
      for (const other of STORED_STATUSES.filter((s) => s !== status)) {
        const indexes = [ks.scopeStatus(bucket, scope, other), ...(other === "unknown" ? [ks.byUnknownTool(bucket, tool)] : [])];
        for (const index of indexes) {
          expect(await redis.zscore(index, memberOf(scope, key))).toBeNull();
          expect(await redis.zscore(index, key)).toBeNull();
        }
      }
    }
    expect(new Set(await Promise.all(pairs.map(async ({ key }) => (await store.get(scope, key))!.status)))).toEqual(
      new Set(STORED_STATUSES),
    );
    // and nothing the store wrote lies outside the 16 bucket tags
    const tags = new Set((await keysWithPrefix(redis, prefix)).map(hashTagOf));
    for (const tag of tags) expect(tag).toMatch(new RegExp(`^${prefix}:(\\d|1[0-5])$`));
  });

  it("purges expired records with all their index entries, and leaves live ones", async () => {
    newScope();
    for (let i = 0; i < 30; i++) {
      const r = await reserve({ key: `p-${i}`, tool: "email.send" });
      await store.complete(scope, `p-${i}`, r.token, ok, i < 20 ? 1_000 : 1_000_000, T0);
    }
    await reserve({ key: "p-inflight", leaseMs: 1 }); // stuck, never purged
    // expired records stay visible until purged
    expect((await store.list({ scope, state: "expired", limit: 100, nowMs: T0 + 10_000 })).items).toHaveLength(20);
    const purged = await store.purge(T0 + 5_000, 3);
    expect(purged).toBeGreaterThanOrEqual(20);
    const keys = await keysWithPrefix(redis, prefix);
    for (const k of keys) {
      const type = await redis.type(k);
      if (type !== "zset") continue;
      const members = await redis.zrange(k, "0", "-1");
      for (let i = 0; i < 20; i++) {
        expect(members).not.toContain(memberOf(scope, `p-${i}`));
        expect(members).not.toContain(`p-${i}`);
        expect(members.some((m) => m.startsWith(`p-${i}\n`))).toBe(false);
      }
    }
    expect(await store.get(scope, "p-3")).toBeNull();
    expect(await store.get(scope, "p-25")).not.toBeNull();
    expect(await store.get(scope, "p-inflight")).not.toBeNull();
    expect(await store.counts(T0 + 10_000, { scope })).toEqual({ inflight: 0, stuck: 1, unknown: 0, done: 10, expired: 0 });
    expect(await listAll({ scope, prefix: "p-", limit: 100, nowMs: T0 })).toHaveLength(11);
  });

  it("replaces an expired record and drops its stale index entries", async () => {
    newScope();
    const first = await reserve({ key: "x", tool: "email.send" });
    await store.complete(scope, "x", first.token, ok, 10, T0);
    const again = await reserve({ key: "x", tool: "tickets.create", fingerprint: "fp-new", nowMs: T0 + 50 });
    expect(again.record.tool).toBe("tickets.create");
    expect((await store.list({ scope, tool: "email.send", limit: 10, nowMs: T0 + 60 })).items).toEqual([]);
    expect((await store.list({ scope, prefix: "x", limit: 10, nowMs: T0 + 60 })).items.map((r) => r.createdAtMs)).toEqual([T0 + 50]);
    expect(await store.counts(T0 + 60, { scope })).toEqual({ inflight: 1, stuck: 0, unknown: 0, done: 0, expired: 0 });
  });

  it("reads a replay with one GET exactly when begin would answer replay, and reserves nothing", async () => {
    newScope();
    // absent, inflight, stuck, unknown, done (same and other fingerprint), expired: begin's answer decides
    const held = await reserve({ key: "inflight" });
    const stuck = await reserve({ key: "stuck", leaseMs: 10 });
    const unknown = await reserve({ key: "unknown" });
    await store.markUnknown(scope, "unknown", unknown.token, "timed out", T0);
    const done = await reserve({ key: "done", session: "s\n1" });
    await store.complete(scope, "done", done.token, ok, 1_000, T0);
    const expired = await reserve({ key: "expired" });
    await store.complete(scope, "expired", expired.token, ok, 10, T0);
    const nowMs = T0 + 100;
    const cases = [["absent", "fp-a"], ["inflight", "fp-a"], ["stuck", "fp-a"], ["unknown", "fp-a"], ["done", "fp-a"], ["done", "fp-other"], ["expired", "fp-a"]] as const;
    for (const [key, fingerprint] of cases) {
      const before = await redis.get(store.keys.record(scope, key));
      const commands = recordCommands();
      let read: Awaited<ReturnType<typeof store.peekReplay>>;
      try {
        read = await store.peekReplay(scope, key, fingerprint, nowMs);
      } finally {
        commands.stop();
      }
      const { sent } = commands;
      expect(sent, key).toEqual(["get"]);
      expect(await redis.get(store.keys.record(scope, key)), key).toBe(before);
      const begun = await store.begin(input({ key, fingerprint, nowMs }));
      expect(read !== null, `${key} ${fingerprint}: begin answered ${begun.kind}`).toBe(begun.kind === "replay");
      if (read && begun.kind === "replay") expect(read).toEqual(begun.record);
    }
    expect(held.kind).toBe("reserved");
    expect(stuck.kind).toBe("reserved");
  });

  it("keeps free-form text intact: sessions and outcome notes with newlines and percent signs", async () => {
    newScope();
    const session = "sess\n%0A%25 ünï";
    const note = "the service answered 502:\nline two %0A 100%";
    const r = await reserve({ key: "free", session, tool: "odd%tool" });
    expect(r.record).toMatchObject({ session, tool: "odd%tool" });
    await store.markUnknown(scope, "free", r.token, note, T0 + 5);
    expect(await store.get(scope, "free")).toMatchObject({ session, outcomeNote: note, status: "unknown", tool: "odd%tool" });
    const listed = await store.list({ scope, state: "unknown", tool: "odd%tool", limit: 10, nowMs: T0 + 10 });
    expect(listed.items.map((x) => [x.key, x.session, x.outcomeNote])).toEqual([["free", session, note]]);
    expect((await store.list({ scope, tool: "odd%tool", limit: 10, nowMs: T0 + 10 })).items.map((x) => x.key)).toEqual(["free"]);
    // an empty session is not an absent one
    const empty = await reserve({ key: "empty-session", session: "" });
    expect(empty.record.session).toBe("");
    expect((await reserve({ key: "no-session", session: null })).record.session).toBeNull();
  });

  it("filters done and expired keys by tool while reading, and counts them", async () => {
    newScope();
    for (let i = 0; i < 12; i++) {
      const r = await reserve({ key: `t-${i}`, tool: i % 3 === 0 ? "email.send" : "tickets.create" });
      await store.complete(scope, `t-${i}`, r.token, ok, i < 6 ? 10 : 60_000, T0);
    }
    const now = T0 + 1_000;
    const keys = async (q: Omit<Parameters<KeyStore["list"]>[0], "nowMs" | "limit">) =>
      (await store.list({ ...q, limit: 50, nowMs: now })).items.map((r) => r.key).sort();
    expect(await keys({ scope, tool: "email.send" })).toEqual(["t-0", "t-3", "t-6", "t-9"]);
    expect(await keys({ scope, tool: "email.send", state: "done" })).toEqual(["t-6", "t-9"]);
    expect(await keys({ scope, tool: "email.send", state: "expired" })).toEqual(["t-0", "t-3"]);
    expect(await keys({ scope, tool: "email.send", prefix: "t-" })).toEqual(["t-0", "t-3", "t-6", "t-9"]);
    expect((await store.counts(now, { tool: "email.send" })).done).toBeGreaterThanOrEqual(2);
    expect(await store.counts(now, { scope })).toEqual({ inflight: 0, stuck: 0, unknown: 0, done: 6, expired: 6 });
  });

  it("rebuild-indexes rewrites records kept in the hash encoding of earlier versions and lists them again; a second run changes nothing", async () => {
    const oldPrefix = `idgtest:${randomUUID().slice(0, 8)}`;
    const { store: old, redis: raw } = await openStore(oldPrefix);
    try {
      const ks = new KeySpace(oldPrefix);
      const oldScope = "tenant-a";
      // as the previous version's scripts wrote them: a hash per record, seven index entries
      const rows = [
        { key: "h-done", status: "done", tool: "email.send", extra: ["completedAtMs", String(T0 + 5), "expiresAtMs", String(T0 + 60_000), "resultStatus", "201", "resultBody", '{"id":"x\n%"}', "resultFinal", "0"] },
        { key: "h-unknown", status: "unknown", tool: "tickets.create", extra: ["leaseUntilMs", String(T0 + 1_000), "unknownAtMs", String(T0 + 7), "outcomeNote", "timed out\nafter 400 ms"] },
        { key: "h-inflight", status: "inflight", tool: "email.send", extra: ["leaseUntilMs", String(T0 + 60_000), "session", "s%1"] },
      ];
      for (const [i, r] of rows.entries()) {
        const b = bucketOf(oldScope, r.key);
        const base = ks.base(b);
        await raw.hset(ks.record(oldScope, r.key), "scope", oldScope, "key", r.key, "tool", r.tool, "fingerprint", "fp-1", "status", r.status,
          "token", String(100 + i), "createdAtMs", String(T0 + i), "fallback", "0", "executionId", `e-${i}`, ...r.extra);
        const member = memberOf(oldScope, r.key);
        await raw.zadd(`${base}st:${r.status}`, T0 + 9, member);
        await raw.zadd(`${base}stt:${r.status}:${r.tool}`, T0 + 9, member);
        await raw.zadd(`${base}sts:${r.status}:${oldScope}`, T0 + 9, member);
        await raw.zadd(`${base}created`, T0 + i, member);
        await raw.zadd(`${base}tool:${r.tool}`, T0 + i, member);
        await raw.zadd(`${base}scope:${oldScope}`, T0 + i, member);
        await raw.zadd(`${base}lex`, 0, `${r.key}\n${oldScope}\n${T0 + i}`);
      }
      await expect(old.begin(input({ scope: oldScope, key: "h-done", fingerprint: "fp-1" }))).rejects.toThrow(/WRONGTYPE|rebuild-indexes/);

      const first = await old.rebuildIndexes();
      expect(first).toMatchObject({ records: 3, rewritten: 3 });
      expect(first.droppedIndexes).toBeGreaterThanOrEqual(7);
      const now = T0 + 2_000;
      expect(await old.get(oldScope, "h-done")).toMatchObject({ status: "done", tool: "email.send", executionId: "e-0", result: { status: 201, body: '{"id":"x\n%"}', final: false }, expiresAtMs: T0 + 60_000 });
      expect(await old.get(oldScope, "h-unknown")).toMatchObject({ status: "unknown", outcomeNote: "timed out\nafter 400 ms", unknownAtMs: T0 + 7 });
      expect(await old.get(oldScope, "h-inflight")).toMatchObject({ status: "inflight", session: "s%1", leaseUntilMs: T0 + 60_000 });
      expect(await old.counts(now)).toEqual({ inflight: 1, stuck: 0, unknown: 1, done: 1, expired: 0 });
      expect((await old.list({ limit: 10, nowMs: now })).items.map((r) => r.key)).toEqual(["h-inflight", "h-unknown", "h-done"]);
      expect((await old.list({ state: "unknown", tool: "tickets.create", limit: 10, nowMs: now })).items.map((r) => r.key)).toEqual(["h-unknown"]);
      expect((await old.list({ prefix: "h-d", limit: 10, nowMs: now })).items.map((r) => r.key)).toEqual(["h-done"]);
      // the earlier versions' index keys are gone
      const left = (await keysWithPrefix(raw, oldPrefix)).map((k) => k.slice(k.indexOf("}:") + 2).split(":")[0]);
      expect(left.filter((k) => ["sts", "tool", "scope", "lex"].includes(k))).toEqual([]);
      // and the replay answers from the rewritten record
      const replay = await old.begin(input({ scope: oldScope, key: "h-done", fingerprint: "fp-1", nowMs: now }));
      expect(replay.kind === "replay" && replay.record.result?.status).toBe(201);

      expect(await old.rebuildIndexes()).toMatchObject({ records: 3, rewritten: 0 });
      expect(await old.counts(now)).toEqual({ inflight: 1, stuck: 0, unknown: 1, done: 1, expired: 0 });
    } finally {
      await deletePrefix(raw, oldPrefix);
      await old.close();
    }
  });

  it("stores result bodies byte for byte", async () => {
    newScope();
    const body = '{"s":"\\u0000 \u00e9\u4e2d\ud83d\ude00 \\"q\\" \\n","n":1e400,"x":"  \t"}';
    const r = await reserve();
    const done = await store.complete(scope, "k1", r.token, { status: 201, body, final: false }, 60_000, T0);
    expect(done.ok && done.record.result?.body).toBe(body);
    expect((await store.get(scope, "k1"))?.result).toEqual({ status: 201, body, final: false });
  });

  it("hands out increasing, distinct tokens, also after the database is flushed", async () => {
    const flushPrefix = `idgtest:${randomUUID().slice(0, 8)}`;
    // a redis-server of this test's own: the shared one is never flushed
    const own = await RedisProcess.startOnFreePort();
    const { store: flushStore, redis: flushRedis } = await openStore(flushPrefix, own.url);
    try {
      scope = "flush";
      const before = await Promise.all(Array.from({ length: 64 }, (_, i) => flushStore.begin(input({ key: `f-${i}` }))));
      const beforeTokens = before.map((o) => (o.kind === "reserved" ? o.token : NaN));
      expect(new Set(beforeTokens).size).toBe(64);
      expect(beforeTokens.every((t) => Number.isSafeInteger(t) && t > 0)).toBe(true);
      // tokens encode their bucket, so buckets never collide
      before.forEach((o, i) => expect(beforeTokens[i] % 16).toBe(bucketOf("flush", `f-${i}`)));

      // per bucket, strictly increasing: reserve and give back one key over and over
      const seq: number[] = [];
      for (let i = 0; i < 20; i++) {
        const out = await flushStore.begin(input({ key: "same-bucket", nowMs: T0 + i }));
        if (out.kind !== "reserved") throw new Error(`expected reserved, got ${out.kind}`);
        seq.push(out.token);
        expect(await flushStore.abandon("flush", "same-bucket", out.token)).toBe(true);
      }
      expect(new Set(seq).size).toBe(20);
      expect(seq).toEqual([...seq].sort((a, b) => a - b));

      await flushRedis.flushdb();
      expect(await flushRedis.dbsize()).toBe(0);
      const after = await Promise.all(Array.from({ length: 64 }, (_, i) => flushStore.begin(input({ key: `f-${i}` }))));
      const maxBefore = Math.max(...beforeTokens);
      for (const o of after) {
        expect(o.kind).toBe("reserved");
        if (o.kind === "reserved") expect(o.token).toBeGreaterThan(maxBefore);
      }
    } finally {
      await flushStore.close();
      await own.dispose();
    }
  });

  it("goes out as one EVALSHA per begin and complete, and one GET per get", async () => {
    newScope();
    await reserve({ key: "warm" }); // scripts are loaded from here on
    const { sent, stop } = recordCommands();
    try {
      const r = await reserve({ key: "rt" });
      expect(sent).toEqual(["evalsha"]);
      await store.complete(scope, "rt", r.token, ok, 60_000, T0);
      expect(sent).toEqual(["evalsha", "evalsha"]);
      expect((await store.begin(input({ key: "rt" }))).kind).toBe("replay");
      expect(sent).toEqual(["evalsha", "evalsha", "evalsha"]);
      await store.get(scope, "rt");
      expect(sent.at(-1)).toBe("get");
      expect(sent).toHaveLength(4);
    } finally {
      stop();
    }
  });

  it("reserves exactly once among 200 concurrent callers, and 200 distinct keys at once", async () => {
    newScope();
    const race = await Promise.all(Array.from({ length: 200 }, () => store.begin(input({ key: "race" }))));
    expect(race.filter((o) => o.kind === "reserved")).toHaveLength(1);
    const many = await Promise.all(Array.from({ length: 200 }, (_, i) => store.begin(input({ key: `m-${i}` }))));
    expect(many.filter((o) => o.kind === "reserved")).toHaveLength(200);
  });

  it("announces each change of a record on its channel, named alike in Lua and TypeScript", async () => {
    newScope();
    const keys = new KeySpace(prefix);
    expect(keys.changeChannel(scope, "a:b*")).toBe(`{${prefix}:${bucketOf(scope, "a:b*")}}:chg:${scope}\na:b*`);
    const heard: [string, string][] = [];
    const listener = redis.duplicate();
    listener.on("message", (channel: string, message: string) => heard.push([channel, message]));
    try {
      const names = ["c", "u", "a", "rel", "res", "stuck", "exp"];
      await listener.subscribe(...names.map((k) => keys.changeChannel(scope, k)));
      const c = await reserve({ key: "c" });
      await store.complete(scope, "c", c.token, ok, 1_000, T0);
      const u = await reserve({ key: "u" });
      await store.markUnknown(scope, "u", u.token, "timed out after 400 ms", T0);
      const a = await reserve({ key: "a" });
      expect(await store.abandon(scope, "a", a.token + 1)).toBe(false); // refused: no notice
      await store.abandon(scope, "a", a.token);
      await reserve({ key: "rel" });
      await store.release(scope, "rel", { nowMs: T0, force: true });
      await reserve({ key: "res" });
      await store.resolve(scope, "res", ok, 60_000, { nowMs: T0, force: true });
      await reserve({ key: "stuck", leaseMs: 10 });
      await reserve({ key: "stuck", nowMs: T0 + 20, takeoverStuck: true });
      await reserve({ key: "exp" }); // a new record: no notice
      await store.purge(T0 + 1_001);
      await store.ping();
      const want: [string, string][] = [
        ["c", "done"], ["u", "unknown"], ["a", "absent"], ["rel", "absent"], ["res", "done"], ["stuck", "inflight"], ["c", "absent"],
      ];
      for (let tries = 0; heard.length < want.length && tries < 100; tries++) await new Promise((r) => setTimeout(r, 20));
      expect(heard).toEqual(want.map(([k, m]) => [keys.changeChannel(scope, k), m]));
    } finally {
      listener.disconnect();
    }
  });

  it("keeps its waiters through a dropped subscriber connection: ioredis subscribes again", async () => {
    newScope();
    const r = await reserve({ key: "drop" });
    const waiting = store.waitForChange(scope, "drop", 10_000);
    const channel = store.keys.changeChannel(scope, "drop");
    const subscribed = async () => (await redis.pubsub("NUMSUB", channel))[1] === 1;
    for (let tries = 0; !(await subscribed()); tries++) {
      if (tries > 250) throw new Error("never subscribed");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const name = `idemgate:${prefix}:changes`;
    const line = String(await redis.call("CLIENT", "LIST", "TYPE", "pubsub")).split("\n").find((l) => l.includes(` name=${name} `));
    expect(line).toBeDefined();
    await redis.client("KILL", "ID", /\bid=(\d+)/.exec(line!)![1]);
    expect(await subscribed()).toBe(false);
    for (let tries = 0; !(await subscribed()); tries++) {
      if (tries > 250) throw new Error("never subscribed again");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await store.complete(scope, "drop", r.token, ok, 60_000, T0);
    expect(await waiting).toBe(true);
  });

  it("ends its waits with false on close, and closes the subscriber connection", async () => {
    newScope();
    const own = `idgtest:${randomUUID().slice(0, 8)}`;
    const { store: closing } = await openStore(own);
    const r = await closing.begin(input({ key: "c" }));
    expect(r.kind).toBe("reserved");
    const waiting = closing.waitForChange(scope, "c", 60_000);
    const named = async () => String(await redis.call("CLIENT", "LIST", "TYPE", "pubsub")).includes(` name=idemgate:${own}:changes `);
    for (let tries = 0; !(await named()); tries++) {
      if (tries > 250) throw new Error("no subscriber connection");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await closing.close();
    expect(await waiting).toBe(false);
    expect(await closing.waitForChange(scope, "c", 60_000)).toBe(false);
    for (let tries = 0; (await named()) && tries < 100; tries++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await named()).toBe(false);
    await deletePrefix(redis, own);
  });
});
