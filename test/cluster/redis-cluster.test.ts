// The Redis key store on a real Redis Cluster: 3 masters started here (redis-server in cluster
// mode on free loopback ports from 7101 up), stopped in afterAll whatever the tests did. A missing
// redis-server fails this file; it never skips.
import { randomUUID } from "node:crypto";
import { Cluster, Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { loadConfig as loadEnvConfig } from "@/lib/server/config";
import { Engine } from "@/lib/idempotency/engine";
import type { StoredResult } from "@/lib/idempotency/record";
import type { ToolPolicy } from "@/lib/idempotency/tool";
import { beginInputs, describeKeyStoreContract } from "@/test/support/key-store-contract";
import type { KeyStore } from "@/lib/idempotency/key-store";
import { BUCKET_COUNT, KeySpace, bucketOf, hashTagOf } from "@/lib/store/redis/key-names";
import { RedisKeyStore, createRedisClusterKeyStore } from "@/lib/store/redis/redis-key-store";
import { findFreePorts, startRedisCluster, type RedisClusterHandle } from "@/scripts/redis-cluster.mjs";
import { createTestPostgres } from "@/test/support/databases";

const T0 = 1_800_000_000_000;
const ok: StoredResult = { status: 200, body: '{"ok":true}', final: false };

let cluster: RedisClusterHandle;

beforeAll(async () => {
  cluster = await startRedisCluster({ ports: await findFreePorts(3) });
}, 90_000);

afterAll(async () => {
  await cluster?.stop();
});

/** one plain connection per master, for looking at what the store wrote where */
async function withMasters<T>(fn: (masters: { port: number; redis: Redis }[]) => Promise<T>): Promise<T> {
  const masters = cluster.nodes.map(({ host, port }) => {
    const redis = new Redis({ host, port, maxRetriesPerRequest: 1 });
    redis.on("error", () => {});
    return { port, redis };
  });
  try {
    return await fn(masters);
  } finally {
    for (const m of masters) m.redis.disconnect();
  }
}

async function keysOn(redis: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await redis.scan(cursor, "MATCH", `{${prefix}:*`, "COUNT", 1000);
    found.push(...batch);
    cursor = next;
  } while (cursor !== "0");
  return found;
}

async function deletePrefix(prefix: string): Promise<void> {
  await withMasters(async (masters) => {
    for (const { redis } of masters) {
      const keys = await keysOn(redis, prefix);
      // one DEL per key: keys of different buckets are in different slots
      await Promise.all(keys.map((k) => redis.del(k)));
    }
  });
}

function clusterClient(): Cluster {
  const client = new Cluster(cluster.nodes, { enableAutoPipelining: true, redisOptions: { maxRetriesPerRequest: 1 } });
  client.on("error", () => {});
  return client;
}

it("starts 3 masters that share all 16384 slots", async () => {
  await withMasters(async (masters) => {
    for (const { redis } of masters) {
      const info = String(await redis.cluster("INFO"));
      expect(info).toContain("cluster_state:ok");
      expect(info).toMatch(/cluster_size:3\b/);
      expect(info).toMatch(/cluster_slots_ok:16384\b/);
    }
  });
});

it("fails loudly, not silently, when redis-server cannot start", async () => {
  const ports = await findFreePorts(3, cluster.ports[2] + 1);
  await expect(startRedisCluster({ ports, redisServer: "/nonexistent/redis-server" })).rejects.toThrow(/cannot start/);
  // and it left nothing behind on those ports
  expect(await findFreePorts(3, ports[0])).toEqual(ports);
});

it("takes the cluster from REDIS_CLUSTER_NODES, never together with REDIS_URL", () => {
  const loadConfig = (env: Record<string, string>) => loadEnvConfig(env as unknown as NodeJS.ProcessEnv);
  const config = loadConfig({ REDIS_CLUSTER_NODES: " 127.0.0.1:7101, redis-a.internal:7000,[::1]:7002" });
  expect(config.redisClusterNodes).toEqual([
    { host: "127.0.0.1", port: 7101 },
    { host: "redis-a.internal", port: 7000 },
    { host: "::1", port: 7002 },
  ]);
  expect(config.redisUrl).toBeNull();
  expect(loadConfig({}).redisClusterNodes).toBeNull();
  expect(() => loadConfig({ REDIS_CLUSTER_NODES: "127.0.0.1" })).toThrow(/REDIS_CLUSTER_NODES/);
  expect(() => loadConfig({ REDIS_CLUSTER_NODES: "127.0.0.1:99999" })).toThrow(/REDIS_CLUSTER_NODES/);
  expect(() =>
    loadConfig({ REDIS_CLUSTER_NODES: "127.0.0.1:7101", REDIS_URL: "redis://127.0.0.1:6379" }),
  ).toThrow(/not both/);
});

describeKeyStoreContract("redis cluster", async () => {
  const prefix = `idgtest-${randomUUID().slice(0, 8)}`;
  const store = createRedisClusterKeyStore(cluster.nodes, { prefix });
  // another process's store: a cluster client of its own on the same prefix
  const peer = createRedisClusterKeyStore(cluster.nodes, { prefix });
  await store.ping();
  await peer.ping();
  return {
    store: store as KeyStore,
    peer: peer as KeyStore,
    // each subscriber connection is to one node: the change channels subscribed on any master
    listening: () =>
      withMasters(async (masters) => {
        let n = store.watchedChannels + peer.watchedChannels;
        for (const { redis } of masters) n += (await redis.pubsub("CHANNELS", `{${prefix}:*}:chg:*`)).length;
        return n;
      }),
    cleanup: async () => {
      await peer.close();
      await store.close();
      await deletePrefix(prefix);
    },
  };
});

describe("RedisKeyStore on a Redis Cluster", () => {
  const prefix = `idgtest-${randomUUID().slice(0, 8)}`;
  const keys = new KeySpace(prefix);
  let client: Cluster;
  let store: RedisKeyStore;
  let scope: string;
  const newScope = () => (scope = `c${randomUUID().slice(0, 8)}`);
  const input = beginInputs(() => ({ scope, nowMs: T0 }));

  beforeAll(async () => {
    client = clusterClient();
    store = new RedisKeyStore(client, { prefix });
    await store.ping();
  });
  afterAll(async () => {
    await store?.close();
    await deletePrefix(prefix);
  });

  /** which master (by port) serves a key's slot */
  async function portOfSlot(masters: { port: number; redis: Redis }[], key: string): Promise<number> {
    const slot = Number(await masters[0].redis.cluster("KEYSLOT", key));
    const ranges = await masters[0].redis.cluster("SLOTS");
    const range = ranges.find(([from, to]) => slot >= from && slot <= to);
    if (!range || !range[2]) throw new Error(`slot ${slot} is not served`);
    return Number(range[2][1]);
  }

  it("spreads the 16 buckets over the masters, each bucket whole on the master of its slot", async () => {
    newScope();
    const n = 96;
    for (let i = 0; i < n; i++) {
      const out = await store.begin(input({ key: `spread-${i}`, tool: i % 2 ? "email.send" : "tickets.create" }));
      expect(out.kind).toBe("reserved");
      if (out.kind === "reserved" && i % 3 === 0) await store.complete(scope, `spread-${i}`, out.token, ok, 60_000, T0);
    }
    await withMasters(async (masters) => {
      const holders = new Map<string, Set<number>>(); // hash tag → masters holding keys with it
      let recordsSeen = 0;
      const nodesWithRecords = new Set<number>();
      for (const { port, redis } of masters) {
        for (const key of await keysOn(redis, prefix)) {
          const tag = hashTagOf(key);
          expect(tag).toMatch(new RegExp(`^${prefix}:(\\d|1[0-5])$`));
          holders.set(tag, (holders.get(tag) ?? new Set()).add(port));
          if (key.includes(`}:r:${scope}:`)) {
            recordsSeen++;
            nodesWithRecords.add(port);
          }
        }
      }
      expect(recordsSeen).toBe(n);
      // every bucket's keys (record, token, epoch, indexes) sit on exactly one master: its slot's
      for (const [tag, ports] of holders) {
        expect([...ports]).toEqual([await portOfSlot(masters, `{${tag}}`)]);
      }
      expect(holders.size).toBe(BUCKET_COUNT); // markEpochs wrote every bucket
      // the point of the buckets: the store's data is really spread over the cluster
      expect(nodesWithRecords.size).toBeGreaterThanOrEqual(2);
      const bucketMasters = new Set(await Promise.all(Array.from({ length: BUCKET_COUNT }, (_, b) => portOfSlot(masters, keys.base(b)))));
      expect(bucketMasters.size).toBeGreaterThanOrEqual(2);
    });
  });

  it("lists and counts across every master, and pages through all of them exactly once", async () => {
    newScope();
    const n = 60;
    const tokens = new Map<string, number>();
    for (let i = 0; i < n; i++) {
      const out = await store.begin(input({ key: `all-${String(i).padStart(2, "0")}`, nowMs: T0 + (i % 7) }));
      if (out.kind !== "reserved") throw new Error(`not reserved: ${out.kind}`);
      tokens.set(`all-${String(i).padStart(2, "0")}`, out.token);
    }
    const doneKeys = [...tokens.keys()].filter((_, i) => i % 4 === 0);
    for (const key of doneKeys) await store.complete(scope, key, tokens.get(key)!, ok, 60_000, T0 + 10);

    const counts = await store.counts(T0 + 20, { scope });
    expect(counts).toEqual({ inflight: n - doneKeys.length, stuck: 0, unknown: 0, done: doneKeys.length, expired: 0 });

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await store.list({ scope, limit: 7, cursor: cursor ?? undefined, nowMs: T0 + 20 });
      seen.push(...page.items.map((r) => r.key));
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(seen.sort()).toEqual([...tokens.keys()].sort());

    const done = await store.list({ scope, state: "done", limit: 100, nowMs: T0 + 20 });
    expect(done.items.map((r) => r.key).sort()).toEqual(doneKeys.sort());
    const byPrefix = await store.list({ scope, prefix: "all-1", limit: 100, nowMs: T0 + 20 });
    expect(byPrefix.items.map((r) => r.key).sort()).toEqual([...tokens.keys()].filter((k) => k.startsWith("all-1")).sort());

    // the listed records came from more than one master
    await withMasters(async (masters) => {
      const ports = new Set(await Promise.all(seen.map((key) => portOfSlot(masters, keys.record(scope, key)))));
      expect(ports.size).toBeGreaterThanOrEqual(2);
    });

    // (purge works on the whole store: the other tests' done records under this prefix go too)
    const purged = await store.purge(T0 + 60_000 + 11);
    expect(purged).toBeGreaterThanOrEqual(doneKeys.length);
    expect((await store.counts(T0 + 20, { scope })).done).toBe(0);
  });

  it("rebuild-indexes scans every master: records of the earlier hash encoding on each are rewritten and listed again", async () => {
    const oldPrefix = `idgtest-${randomUUID().slice(0, 8)}`;
    const old = new RedisKeyStore(clusterClient(), { prefix: oldPrefix });
    const oldKeys = new KeySpace(oldPrefix);
    try {
      const oldScope = "tenant-a";
      const names = Array.from({ length: 24 }, (_, i) => `old-${String(i).padStart(2, "0")}`);
      for (const [i, key] of names.entries()) {
        const base = oldKeys.base(bucketOf(oldScope, key));
        // as earlier versions wrote a done record: a hash and (among others) its status and time entries
        await client.hset(oldKeys.record(oldScope, key), "scope", oldScope, "key", key, "tool", "email.send", "fingerprint", "fp", "status", "done",
          "token", String(100 + i), "createdAtMs", String(T0 + i), "fallback", "0", "executionId", `e-${i}`, "completedAtMs", String(T0 + 50),
          "expiresAtMs", String(T0 + 60_000), "resultStatus", "200", "resultBody", `{"i":${i}}`, "resultFinal", "0");
        await client.zadd(`${base}st:done`, T0 + 60_000, `${oldScope}\n${key}`);
        await client.zadd(`${base}scope:${oldScope}`, T0 + i, `${oldScope}\n${key}`);
      }
      await withMasters(async (masters) => {
        const ports = new Set(await Promise.all(names.map((key) => portOfSlot(masters, oldKeys.record(oldScope, key)))));
        expect(ports.size).toBe(3);
      });
      expect(await old.rebuildIndexes()).toMatchObject({ records: names.length, rewritten: names.length });
      expect(await old.get(oldScope, "old-07")).toMatchObject({ status: "done", result: { status: 200, body: '{"i":7}', final: false } });
      expect(await old.counts(T0 + 100)).toMatchObject({ done: names.length });
      const page = await old.list({ limit: 100, nowMs: T0 + 100 });
      expect(page.items.map((r) => r.key)).toEqual([...names].reverse());
      expect(await old.rebuildIndexes()).toMatchObject({ records: names.length, rewritten: 0 });
    } finally {
      await old.close();
      await deletePrefix(oldPrefix);
    }
  });

  it("reserves exactly once among 200 concurrent callers of one key, and 200 distinct keys at once", async () => {
    newScope();
    const race = await Promise.all(Array.from({ length: 200 }, () => store.begin(input({ key: "race" }))));
    expect(race.filter((o) => o.kind === "reserved")).toHaveLength(1);
    expect(race.filter((o) => o.kind === "conflict")).toHaveLength(199);
    const many = await Promise.all(Array.from({ length: 200 }, (_, i) => store.begin(input({ key: `m-${i}` }))));
    expect(many.filter((o) => o.kind === "reserved")).toHaveLength(200);
    const tokens = many.map((o) => (o.kind === "reserved" ? o.token : 0));
    expect(new Set(tokens).size).toBe(200);
    expect((await store.counts(T0 + 1, { scope })).inflight).toBe(201);
  });

  it("sends a begin as one EVALSHA to the master of the key's slot, and nothing to the others", async () => {
    newScope();
    await store.begin(input({ key: "warm" })); // each connection has loaded the scripts from here on
    await withMasters(async (masters) => {
      const stats = async () =>
        Promise.all(
          masters.map(async ({ redis }) => {
            const info = await redis.info("commandstats");
            const calls = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
            return { evalsha: calls("evalsha"), eval: calls("eval") };
          }),
        );
      const key = "routed";
      const owner = await portOfSlot(masters, keys.record(scope, key));
      const before = await stats();
      expect((await store.begin(input({ key }))).kind).toBe("reserved");
      const after = await stats();
      masters.forEach(({ port }, i) => {
        expect(after[i].eval - before[i].eval).toBe(0);
        expect(after[i].evalsha - before[i].evalsha).toBe(port === owner ? 1 : 0);
      });
    });
  });

  it("recovers from NOSCRIPT on every node after SCRIPT FLUSH", async () => {
    newScope();
    await store.begin(input({ key: "before-flush" }));
    await withMasters(async (masters) => {
      for (const { redis } of masters) await redis.script("FLUSH");
    });
    // keys in many buckets, so every master answers NOSCRIPT at least once
    const outs = await Promise.all(Array.from({ length: 48 }, (_, i) => store.begin(input({ key: `after-flush-${i}` }))));
    expect(outs.every((o) => o.kind === "reserved")).toBe(true);
    const first = outs[0];
    if (first.kind !== "reserved") throw new Error("not reserved");
    expect((await store.complete(scope, "after-flush-0", first.token, ok, 60_000, T0)).ok).toBe(true);
    expect((await store.begin(input({ key: "after-flush-0" }))).kind).toBe("replay");
  });

  it("wakes waiters on keys of every master through one subscriber connection to one node", async () => {
    newScope();
    const other = new RedisKeyStore(clusterClient(), { prefix }); // another process's store
    try {
      const channelsPerNode = () =>
        withMasters((masters) => Promise.all(masters.map(async ({ redis }) => (await redis.pubsub("CHANNELS", `{${prefix}:*}:chg:*`)).length)));
      // a key on each master: the scripts run there, the subscriber listens on one node only
      const picked = await withMasters(async (masters) => {
        const byPort = new Map<number, string>();
        for (let i = 0; byPort.size < masters.length; i++) {
          const key = `node-${i}`;
          const port = await portOfSlot(masters, keys.record(scope, key));
          if (!byPort.has(port)) byPort.set(port, key);
          if (i > 500) throw new Error("no key found for every master");
        }
        return [...byPort.values()];
      });
      const tokens = new Map<string, number>();
      for (const key of picked) {
        const out = await store.begin(input({ key }));
        if (out.kind !== "reserved") throw new Error(`not reserved: ${out.kind}`);
        tokens.set(key, out.token);
      }
      const waiting = picked.map((key) => store.waitForChange(scope, key, 5_000));
      for (let tries = 0; (await channelsPerNode()).reduce((a, b) => a + b, 0) < picked.length; tries++) {
        if (tries > 250) throw new Error("the waits never subscribed");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // all on one node: one subscriber connection
      expect((await channelsPerNode()).filter((n) => n > 0)).toEqual([picked.length]);
      await new Promise((resolve) => setTimeout(resolve, 100)); // the waits' own reads are done
      for (const key of picked) expect((await other.complete(scope, key, tokens.get(key)!, ok, 60_000, T0 + 1)).ok).toBe(true);
      expect(await Promise.all(waiting)).toEqual(picked.map(() => true));
      for (let tries = 0; (await channelsPerNode()).some((n) => n > 0) && tries < 100; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(await channelsPerNode()).toEqual(picked.map(() => 0));
      expect(store.watchedChannels).toBe(0);
    } finally {
      await other.close();
    }
  });

  it("adds several scopes' result bytes in one pipeline to the master of their shared slot", async () => {
    const scopes = [newScope(), newScope(), newScope()];
    await store.resultBytes.add(scopes.map((s, i) => ({ scope: s, bytes: 100 * (i + 1), expiresAtMs: T0 + 60_000 })));
    for (const [i, s] of scopes.entries()) expect(await store.resultBytes.usage(s, T0)).toBe(100 * (i + 1));
    const all = await store.resultBytes.all(T0);
    expect(scopes.map((s) => all.get(s))).toEqual([100, 200, 300]);
    await withMasters(async (masters) => {
      const port = await portOfSlot(masters, keys.resultBytes(scopes[0]));
      expect(await portOfSlot(masters, keys.resultBytesScopes())).toBe(port);
    });
  });

  it("refuses a script call whose keys lie outside the bucket it names, and the server refuses cross-slot keys", async () => {
    newScope();
    // find two keys whose buckets are on different masters
    const a = "guard-a";
    const b = Array.from({ length: 64 }, (_, i) => `guard-b${i}`).find((k) => bucketOf(scope, k) !== bucketOf(scope, a))!;
    await store.begin(input({ key: a }));
    await expect(client.idgRelease(keys.record(scope, a), keys.base(bucketOf(scope, b)))).rejects.toThrow(/outside bucket/);
    expect((await store.get(scope, a))?.status).toBe("inflight");
    // what the bucket tags are for: the server refuses an undeclared key served by another node
    // (an undeclared key in another slot of the same node is accepted by Redis 7.0, hence the
    // scripts' own check above)
    const declared = keys.token(bucketOf(scope, a));
    await withMasters(async (masters) => {
      const here = await portOfSlot(masters, declared);
      let elsewhere = "";
      for (let i = 0; elsewhere === ""; i++) {
        if ((await portOfSlot(masters, `{elsewhere-${i}}`)) !== here) elsewhere = `{elsewhere-${i}}x`;
      }
      await expect(client.eval("return redis.call('GET', ARGV[1])", 1, declared, elsewhere)).rejects.toThrow(/non local key/);
    });
  });
});

describe("engine on the Redis Cluster store", () => {
  const charge: ToolPolicy = {
    name: "payments.charge",
    kind: "write",
    ttlMs: 60_000,
    leaseMs: 5_000,
    stuckPolicy: "block",
    fallbackTtlMs: null,
    dedupes: false,
  };
  const prefix = `idgtest-${randomUUID().slice(0, 8)}`;
  let pg: Awaited<ReturnType<typeof createTestPostgres>>;
  let store: RedisKeyStore;
  let audit: PrismaAuditWriter;
  let clock = T0;

  beforeAll(async () => {
    pg = await createTestPostgres("cluster");
    store = createRedisClusterKeyStore(cluster.nodes, { prefix });
    audit = new PrismaAuditWriter(pg.db.prisma, { mode: "durable", flushIntervalMs: 5 });
  });
  afterAll(async () => {
    await audit?.close();
    await store?.close();
    await deletePrefix(prefix);
    await pg?.drop();
  });

  it("runs a first call once and replays it to the duplicate, with the audit log in PostgreSQL", async () => {
    const engine = new Engine({ store, audit, now: () => clock });
    const runs: unknown[] = [];
    const run = async (args: unknown) => {
      runs.push(args);
      return { body: { chargeId: `ch_${runs.length}` } };
    };
    const scope = `e${randomUUID().slice(0, 8)}`;
    const req = { scope, key: "order-1", args: { amountCents: 500, currency: "EUR" }, session: "run-a" };
    const first = await engine.invoke(charge, run, req);
    expect(first).toMatchObject({ kind: "executed", status: 200, body: '{"chargeId":"ch_1"}' });
    clock += 1_500;
    const second = await engine.invoke(charge, run, req);
    expect(second).toMatchObject({ kind: "replayed", status: 200, body: '{"chargeId":"ch_1"}', gapMs: 1_500 });
    expect(runs).toHaveLength(1);

    await audit.flush();
    const execs = await pg.db.prisma.execution.findMany({ where: { scope } });
    expect(execs).toHaveLength(1);
    expect(execs[0]).toMatchObject({ outcome: "succeeded", resultStatus: 200 });
    const sup = await pg.db.prisma.suppression.findMany({ where: { scope } });
    expect(sup).toMatchObject([{ kind: "replay", gapMs: 1_500, originalExecutionId: execs[0].id }]);
    expect((await store.get(scope, "order-1"))?.status).toBe("done");
  });
});
