import { Command } from "commander";
import type { Runtime } from "@/lib/runtime";
import { withRuntime } from "../with-runtime";

interface MigrationRow {
  migration_name: string;
  finished_at: Date;
  db_now: Date;
}

/**
 * Opening the runtime applies pending migrations; what this run applied is told apart afterwards by
 * the database's own clock (finished since this command started), so clock skew between this
 * machine and a PostgreSQL server does not matter.
 */
async function describeMigrations(rt: Runtime, startedAtMs: number): Promise<{ applied: string[]; all: string[] }> {
  const rows = await rt.db.withSession((conn) =>
    conn.query<MigrationRow>(
      `SELECT migration_name, finished_at, now() AS db_now FROM "_prisma_migrations"
       WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL ORDER BY migration_name`,
    ),
  );
  const elapsedMs = Date.now() - startedAtMs + 1_000;
  const applied = rows.filter((r) => new Date(r.db_now).getTime() - new Date(r.finished_at).getTime() <= elapsedMs).map((r) => r.migration_name);
  return { applied, all: rows.map((r) => r.migration_name) };
}

export function migrateCommand(): Command {
  return new Command("migrate").description("apply pending database migrations").action(async () => {
    const startedAtMs = Date.now();
    const { applied, all, location } = await withRuntime(async (rt) => ({ ...(await describeMigrations(rt, startedAtMs)), location: rt.db.location }));
    if (applied.length === 0) {
      console.log(`Database ${location} is up to date (${all.length} migrations, latest ${all.at(-1) ?? "none"}).`);
      return;
    }
    console.log(`Applied ${applied.length} migration${applied.length === 1 ? "" : "s"} to ${location}:`);
    for (const name of applied) console.log(`  ${name}`);
  });
}
