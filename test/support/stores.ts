import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import type { Database } from "@/lib/db/database";
import type { KeyStore } from "@/lib/idempotency/key-store";
import { createRedisKeyStore } from "@/lib/store/redis/redis-key-store";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { createTestPglite, createTestPostgres, REDIS_TEST_URL } from "./databases";

export interface StoreUnderTest {
  store: KeyStore;
  /** the database of the audit log for the same test (PostgreSQL or PGlite) */
  db: Database;
  cleanup: () => Promise<void>;
  /** Redis only: what a flush or a restart without persistence does — every key of this store gone */
  loseData?: () => Promise<void>;
}

/** Deletes every Redis key under a test prefix (SCAN is fine in tests, never in the product). */
export async function deleteRedisPrefix(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_TEST_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `*${prefix}*`, "COUNT", 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}

export const STORE_KINDS = ["redis", "postgres", "pglite"] as const;
export type StoreKind = (typeof STORE_KINDS)[number];

/** A real key store of the given kind, with a real audit database beside it. */
export async function openTestStore(kind: StoreKind): Promise<StoreUnderTest> {
  if (kind === "pglite") {
    const { db, drop } = await createTestPglite();
    return { store: new SqlKeyStore(db), db, cleanup: drop };
  }
  const pg = await createTestPostgres(kind);
  if (kind === "postgres") {
    return { store: new SqlKeyStore(pg.db), db: pg.db, cleanup: pg.drop };
  }
  const prefix = `idgtest-${randomUUID().slice(0, 8)}`;
  const store = createRedisKeyStore(REDIS_TEST_URL, { prefix });
  if (!(await store.waitUntilReady(5_000))) throw new Error(`Redis is not reachable at ${REDIS_TEST_URL}`);
  await store.ping();
  return {
    store,
    db: pg.db,
    loseData: () => deleteRedisPrefix(prefix),
    async cleanup() {
      await store.close();
      await deleteRedisPrefix(prefix);
      await pg.drop();
    },
  };
}
