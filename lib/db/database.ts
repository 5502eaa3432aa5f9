import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaPGlite } from "pglite-prisma-adapter";
import pg from "pg";
import { PrismaClient } from "@/generated/prisma/client";
import { redactUrl } from "@/lib/db/redact-url";
import { acquireDataDirLock, type DataDirLock } from "./lock";
import { applyMigrations, type SqlConnection } from "./migrate";
import { tightenModes } from "./private-files";

/** how often the embedded database's files are narrowed to the owner while it is open */
const KEEP_PRIVATE_INTERVAL_MS = 60_000;

export type DatabaseKind = "postgres" | "pglite";

export interface Database {
  kind: DatabaseKind;
  /** where it lives, for status pages: a data directory or a URL without its password */
  location: string;
  prisma: PrismaClient;
  /** the migrations this open applied (empty when the schema was up to date) */
  appliedMigrations: string[];
  /**
   * One statement with `$n` parameters straight through the driver, around Prisma's query pipeline:
   * for the audit log's hot-path writes. Resolves to the number of rows it changed.
   */
  execute(sql: string, params: readonly unknown[], options?: StatementOptions): Promise<number>;
  /** One read statement with `$n` parameters straight through the driver: its rows. */
  query(sql: string, params: readonly unknown[], options?: StatementOptions): Promise<Record<string, unknown>[]>;
  /** one session of the raw driver, for multi-statement SQL and session locks (migrations) */
  withSession<T>(fn: (conn: SqlConnection) => Promise<T>): Promise<T>;
  /**
   * A server only: a new connection outside the pool, not yet connected, that the caller owns and
   * ends (the key store LISTENs on one).
   */
  newConnection?(): pg.Client;
  close(): Promise<void>;
}

export interface StatementOptions {
  /**
   * A name under which a server keeps the statement prepared on each pooled connection (parsed and
   * planned once per connection instead of on every call): for constant SQL on a hot path only,
   * one name per SQL text. The embedded database ignores it.
   */
  prepare?: string;
}

export interface DatabaseOptions {
  /** a PostgreSQL server; without it the embedded database in `dataDir` is used */
  url?: string;
  dataDir?: string;
  /** apply pending migrations on open (default true) */
  migrate?: boolean;
  /** pool size for a server (default 10) */
  poolSize?: number;
}

export async function openDatabase(options: DatabaseOptions): Promise<Database> {
  const dataDir = options.dataDir ?? ".data/pglite";
  const db = options.url ? await openServer(options.url, options.poolSize ?? 10) : await openEmbedded(dataDir);
  try {
    if (options.migrate !== false) db.appliedMigrations = await db.withSession((conn) => applyMigrations(conn));
    // the files a first start unpacks (0666) and those the migrations wrote: the owner's only
    if (!options.url) await tightenModes(dataDir);
  } catch (err) {
    await db.close();
    throw err;
  }
  return db;
}

async function openServer(url: string, poolSize: number): Promise<Database> {
  // Times are stored as UTC in columns without a zone; a session in another TimeZone would shift any
  // timestamptz the SQL converts. Each new connection says UTC before the pool hands it out; the
  // audit SQL also converts with AT TIME ZONE 'UTC', whatever the session says.
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    // idle connections are closed after 10 s, but never the last two: a call after a quiet spell
    // would otherwise wait for a new connection (a few ms) before its intent is written
    min: Math.min(2, poolSize),
    connectionTimeoutMillis: 5_000,
    onConnect: async (client) => {
      await client.query("SET TIME ZONE 'UTC'");
    },
  });
  // An idle client's error (server restart) must not crash the process; the next query reconnects.
  pool.on("error", () => {});
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool) });
  return {
    kind: "postgres",
    location: redactUrl(url),
    prisma,
    appliedMigrations: [],
    async execute(sql, params, options) {
      const values = params as unknown[];
      return (await (options?.prepare ? pool.query({ name: options.prepare, text: sql, values }) : pool.query(sql, values))).rowCount ?? 0;
    },
    async query(sql, params, options) {
      const values = params as unknown[];
      return (await (options?.prepare ? pool.query({ name: options.prepare, text: sql, values }) : pool.query(sql, values))).rows;
    },
    newConnection() {
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000, keepAlive: true });
      // a dropped connection must not crash the process; its owner listens for "end"
      client.on("error", () => {});
      return client;
    },
    async withSession(fn) {
      const client = await pool.connect();
      try {
        return await fn({
          async exec(sql) {
            await client.query(sql);
          },
          async query(sql, params) {
            return (await client.query(sql, params as unknown[])).rows;
          },
        });
      } finally {
        client.release();
      }
    },
    async close() {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}

async function openEmbedded(dataDir: string): Promise<Database> {
  const lock: DataDirLock = await acquireDataDirLock(dataDir);
  try {
    const { PGlite } = await import("@electric-sql/pglite");
    const pglite = await PGlite.create(dataDir);
    await pglite.exec("SET TIME ZONE 'UTC'");
    const raw: SqlConnection = {
      async exec(sql) {
        await pglite.exec(sql);
      },
      async query(sql, params) {
        return (await pglite.query(sql, params as unknown[])).rows as never[];
      },
    };
    const prisma = new PrismaClient({ adapter: new PrismaPGlite(pglite) });
    // PGlite sets the modes of files it writes later itself (lib/db/private-files.ts): narrowed now and then
    const sweep = () => tightenModes(dataDir).catch((err) => console.error(`idemgate: cannot narrow the modes under ${dataDir}: ${(err as Error).message}`));
    let sweeping: Promise<unknown> = Promise.resolve();
    const keepPrivate = setInterval(() => (sweeping = sweep()), KEEP_PRIVATE_INTERVAL_MS);
    keepPrivate.unref();
    return {
      kind: "pglite",
      location: dataDir,
      prisma,
      appliedMigrations: [],
      async execute(sql, params) {
        return (await pglite.query(sql, params as unknown[])).affectedRows ?? 0;
      },
      async query(sql, params) {
        return (await pglite.query<Record<string, unknown>>(sql, params as unknown[])).rows;
      },
      withSession: (fn) => fn(raw),
      async close() {
        clearInterval(keepPrivate);
        try {
          await prisma.$disconnect();
          await pglite.close();
          // what it wrote on the way out (its statistics, a checkpoint)
          await sweeping;
          await sweep();
        } finally {
          // the lock goes last: another process may open the directory as soon as it is free
          await lock.release();
        }
      },
    };
  } catch (err) {
    await lock.release();
    throw err;
  }
}
