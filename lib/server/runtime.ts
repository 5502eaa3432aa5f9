import path from "node:path";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { loadConfig, type Config } from "@/lib/server/config";
import { openDatabase, type Database } from "@/lib/db/database";
import { securePrivateDataDir } from "@/lib/db/private-files";
import { Engine, type CallEvent } from "@/lib/idempotency/engine";
import { ReplayCache } from "@/lib/idempotency/replay-cache";
import { PausedTools } from "@/lib/idempotency/paused-tools";
import { readPausedTools } from "@/lib/audit/paused-tools-table";
import { ScopeResultLimit } from "@/lib/idempotency/scope-result-limit";
import type { KeyStore } from "@/lib/idempotency/key-store";
import { recordCall } from "@/lib/server/metrics";
import { createRedisClusterKeyStore, createRedisKeyStore, RedisKeyStore } from "@/lib/store/redis/redis-key-store";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { getRegistry } from "@/lib/tools";
import type { ToolRegistry } from "@/lib/tools/registry";

const STORE_CONNECT_WAIT_MS = 3_000;

/** Everything a server process (or a CLI command) needs, opened once. */
export interface Runtime {
  config: Config;
  db: Database;
  store: KeyStore;
  audit: PrismaAuditWriter;
  engine: Engine;
  registry: ToolRegistry;
  close(): Promise<void>;
}

export interface OpenRuntimeOptions {
  config?: Config;
  onCall?: (event: CallEvent) => void;
  /** told when the data directory was found open to other users and narrowed (the server logs it; a CLI command stays quiet) */
  onDataDirNarrowed?: (line: string) => void;
}

export async function openRuntime(options: OpenRuntimeOptions = {}): Promise<Runtime> {
  const config = options.config ?? loadConfig();
  // the owner's only: created so, or narrowed (and said) when an earlier version or a copy left it open
  await securePrivateDataDir(config.dataDir, { create: !config.databaseUrl, log: options.onDataDirNarrowed ?? (() => {}) });
  const db = await openDatabase({
    url: config.databaseUrl ?? undefined,
    dataDir: path.join(config.dataDir, "pglite"),
  });
  let store: KeyStore;
  try {
    store = config.redisClusterNodes
      ? createRedisClusterKeyStore(config.redisClusterNodes, { prefix: config.redisPrefix })
      : config.redisUrl
        ? createRedisKeyStore(config.redisUrl, { prefix: config.redisPrefix })
        : new SqlKeyStore(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  // Redis fails calls at once while disconnected; give the first connection a moment. A store that
  // is down at start is not fatal: writes answer 503 until it is back.
  if (store instanceof RedisKeyStore) await store.waitUntilReady(STORE_CONNECT_WAIT_MS);
  const audit = new PrismaAuditWriter(db.prisma, { mode: config.auditMode, execute: db.execute, query: db.query });
  const replayCache = config.replayCache ? new ReplayCache(config.replayCache) : null;
  const scopeResultLimit = config.scopeResultBytes !== null && store.resultBytes ? new ScopeResultLimit(store.resultBytes, config.scopeResultBytes) : null;
  // read before the first call is admitted (a pause survives restarts), then every PAUSE_REFRESH_MS;
  // while a database down at start has not answered, new first executions of write tools are
  // refused (503 unavailable) rather than run past a pause this process could not read
  const pausedTools = new PausedTools(() => readPausedTools(db));
  await pausedTools.refresh().catch(() => {});
  pausedTools.start();
  const engine = new Engine({ store, audit, onCall: options.onCall, replayCache, scopeResultLimit, pausedTools });
  return {
    config,
    db,
    store,
    audit,
    engine,
    registry: getRegistry(),
    async close() {
      pausedTools.stop();
      // writes the queued audit rows; says how many are lost when the database does not take them
      await audit.close().catch((err) => console.error(`idemgate: ${err instanceof Error ? err.message : String(err)}`));
      // the stored results' byte counts still on their way to the store
      await scopeResultLimit?.settled();
      await store.close().catch(() => {});
      await db.close();
    },
  };
}

const holder = globalThis as unknown as { __idemgateRuntime?: Promise<Runtime> };

/**
 * The server's runtime, opened on first use and cached on globalThis so hot reloads in development
 * do not open the embedded database twice. Never opened while `next build` collects pages.
 */
export function getRuntime(): Promise<Runtime> {
  if (process.env.NEXT_PHASE === "phase-production-build") {
    throw new Error("the runtime was asked for during `next build`; mark the page dynamic");
  }
  holder.__idemgateRuntime ??= openRuntime({ onCall: recordCall, onDataDirNarrowed: (line) => console.error(line) }).catch((err) => {
    holder.__idemgateRuntime = undefined;
    throw err;
  });
  return holder.__idemgateRuntime;
}
