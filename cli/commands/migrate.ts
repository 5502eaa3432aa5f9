import { Command } from "commander";
import { withRuntime } from "../with-runtime";

export function migrateCommand(): Command {
  return new Command("migrate").description("apply pending database migrations").action(async () => {
    // opening the runtime applies what is pending and says which ones it applied
    const { applied, all, location } = await withRuntime(async (rt) => {
      const rows = await rt.db.withSession((conn) =>
        conn.query<{ migration_name: string }>(
          `SELECT migration_name FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL ORDER BY migration_name`,
        ),
      );
      return { applied: rt.db.appliedMigrations, all: rows.map((r) => r.migration_name), location: rt.db.location };
    });
    if (applied.length === 0) {
      console.log(`Database ${location} is up to date (${all.length} migrations, latest ${all.at(-1) ?? "none"}).`);
      return;
    }
    console.log(`Applied ${applied.length} migration${applied.length === 1 ? "" : "s"} to ${location}:`);
    for (const name of applied) console.log(`  ${name}`);
  });
}
