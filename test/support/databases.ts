import { randomUUID } from "node:crypto";
import { cp, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { inject } from "vitest";
import { openDatabase, type Database } from "@/lib/db/database";

export const POSTGRES_ADMIN_URL = process.env.TEST_POSTGRES_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
export const REDIS_TEST_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

export function urlFor(database: string): string {
  const u = new URL(POSTGRES_ADMIN_URL);
  u.pathname = "/" + database;
  return u.toString();
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export interface TestPostgres {
  db: Database;
  url: string;
  drop: () => Promise<void>;
}

/** What test/support/global-setup.ts migrated once for this run (undefined outside one). */
function template(key: "postgresTemplate" | "pgliteTemplate"): string | undefined {
  try {
    return inject(key);
  } catch {
    return undefined;
  }
}

/**
 * A fresh PostgreSQL database of the test's own on the local server, migrated (a copy of the run's
 * migrated template when there is one; openDatabase then finds nothing to apply); dropped by `drop`.
 */
export async function createTestPostgres(label: string): Promise<TestPostgres> {
  const name = `idemgate_test_${label}_${randomUUID().slice(0, 8)}`.replace(/[^a-z0-9_]/g, "_");
  const dropDatabase = () => admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
  const from = template("postgresTemplate");
  await admin((c) => c.query(from ? `CREATE DATABASE "${name}" TEMPLATE "${from}"` : `CREATE DATABASE "${name}"`));
  const url = urlFor(name);
  let db: Database;
  try {
    db = await openDatabase({ url });
  } catch (err) {
    await dropDatabase();
    throw err;
  }
  return {
    db,
    url,
    async drop() {
      await db.close();
      await dropDatabase();
    },
  };
}

/** A fresh embedded database in a temporary directory (a copy of the run's migrated one when there is one), removed by `drop`. */
export async function createTestPglite(): Promise<{ db: Database; drop: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-pglite-"));
  const from = template("pgliteTemplate");
  if (from) await cp(from, path.join(dir, "pglite"), { recursive: true });
  const db = await openDatabase({ dataDir: path.join(dir, "pglite") });
  return {
    db,
    async drop() {
      await db.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
