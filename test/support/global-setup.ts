import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import type { TestProject } from "vitest/node";
import { openDatabase } from "@/lib/db/database";
import { POSTGRES_ADMIN_URL, urlFor } from "./databases";

declare module "vitest" {
  export interface ProvidedContext {
    /** a PostgreSQL database migrated once for this run: createTestPostgres copies it (CREATE DATABASE … TEMPLATE) */
    postgresTemplate: string;
    /** an embedded database directory migrated once for this run: createTestPglite copies it */
    pgliteTemplate: string;
  }
}

/**
 * Migrates one PostgreSQL database and one embedded database before the run, which every test
 * database then starts as a copy of (69 fixtures used to run every migration each; a PGlite copy
 * also skips its initdb). Fails the run at once when PostgreSQL is not there.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const name = `idemgate_template_${randomUUID().slice(0, 8)}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 5_000 });
    try {
      await client.connect();
    } catch (err) {
      throw new Error(`PostgreSQL is not reachable at ${POSTGRES_ADMIN_URL} (${(err as Error).message}); the tests need it`);
    }
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE "${name}"`);
  const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-pglite-template-"));
  try {
    const [server, embedded] = await Promise.all([openDatabase({ url: urlFor(name), poolSize: 1 }), openDatabase({ dataDir: path.join(dir, "pglite") })]);
    // nobody may be connected to a template while it is copied
    await Promise.all([server.close(), embedded.close()]);
  } catch (err) {
    await admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  project.provide("postgresTemplate", name);
  project.provide("pgliteTemplate", path.join(dir, "pglite"));
  return async () => {
    await admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await rm(dir, { recursive: true, force: true });
  };
}
