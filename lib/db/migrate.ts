import { createHash, randomUUID } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";

/** The little a migration needs from a raw driver: PGlite and pg both provide it. */
export interface SqlConnection {
  /** runs one or more statements, no parameters */
  exec(sql: string): Promise<void>;
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
}

export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

// Any fixed number: every Idemgate process that migrates one database takes the same lock.
const MIGRATION_LOCK_ID = 72_120_001;

export const MIGRATIONS_DIR = path.join(process.cwd(), "prisma", "migrations");

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  // the migrations are copied into the build by outputFileTracingIncludes (next.config.ts)
  const entries = await readdir(/*turbopackIgnore: true*/ dir, { withFileTypes: true });
  const names = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
  return Promise.all(
    names.map(async (name) => {
      const bytes = await readFile(/*turbopackIgnore: true*/ path.join(dir, name, "migration.sql"));
      return { name, sql: bytes.toString("utf8"), checksum: createHash("sha256").update(bytes).digest("hex") };
    }),
  );
}

/**
 * Applies pending migrations in order, each in its own transaction, under an advisory lock, and
 * records them in Prisma's `_prisma_migrations` table so Prisma's own CLI agrees on the state.
 * Returns the names applied.
 */
export async function applyMigrations(conn: SqlConnection, migrations?: Migration[]): Promise<string[]> {
  const all = migrations ?? (await readMigrations());
  await conn.exec(`
    CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
      "id" VARCHAR(36) PRIMARY KEY NOT NULL,
      "checksum" VARCHAR(64) NOT NULL,
      "finished_at" TIMESTAMPTZ,
      "migration_name" VARCHAR(255) NOT NULL,
      "logs" TEXT,
      "rolled_back_at" TIMESTAMPTZ,
      "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(),
      "applied_steps_count" INTEGER NOT NULL DEFAULT 0
    )`);
  await conn.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_ID]);
  const applied: string[] = [];
  try {
    const rows = await conn.query<{ migration_name: string; checksum: string }>(
      `SELECT migration_name, checksum FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`,
    );
    const done = new Map(rows.map((r) => [r.migration_name, r.checksum]));
    for (const m of all) {
      const seen = done.get(m.name);
      if (seen !== undefined) {
        if (seen !== m.checksum) {
          throw new Error(`migration ${m.name} was changed after it was applied (checksum differs); restore the file`);
        }
        continue;
      }
      await conn.exec("BEGIN");
      try {
        await conn.exec(m.sql);
        await conn.query(
          `INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, applied_steps_count)
           VALUES ($1, $2, now(), $3, 1)`,
          [randomUUID(), m.checksum, m.name],
        );
        await conn.exec("COMMIT");
      } catch (err) {
        await conn.exec("ROLLBACK");
        throw new Error(`migration ${m.name} failed: ${(err as Error).message}`, { cause: err });
      }
      applied.push(m.name);
    }
  } finally {
    await conn.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_ID]);
  }
  return applied;
}
