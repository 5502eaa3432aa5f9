import { randomBytes } from "node:crypto";
import pg from "pg";
import { openDatabase, type Database } from "@/lib/db/database";

/** The PostgreSQL server tests run against; they fail, never skip, when it cannot be reached. */
export const TEST_POSTGRES_URL = process.env.TEST_POSTGRES_URL ?? "postgresql://postgres@127.0.0.1:5432";

export interface TestDatabase {
  db: Database;
  name: string;
  drop(): Promise<void>;
}

function urlFor(database: string): string {
  const url = new URL(TEST_POSTGRES_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

async function admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: urlFor("postgres"), connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** A fresh database with the migrations applied, dropped (forcibly) by `drop()`. */
export async function createTestDatabase(prefix: string): Promise<TestDatabase> {
  const name = `${prefix}_${randomBytes(6).toString("hex")}`;
  await admin((c) => c.query(`CREATE DATABASE "${name}"`));
  let db: Database;
  try {
    db = await openDatabase({ url: urlFor(name), poolSize: 4 });
  } catch (err) {
    await admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    throw err;
  }
  return {
    db,
    name,
    async drop() {
      await db.close();
      await admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    },
  };
}
