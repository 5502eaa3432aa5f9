// `npm run test:e2e`: fresh data for both server configurations, build if stale, run Playwright.
// Extra arguments go to Playwright: `npm run test:e2e -- --project=embedded`.
import { copyFile, mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { Redis } from "ioredis";
import pg from "pg";
import environments from "../e2e/environments.mjs";
import { buildIfStale, ROOT, run } from "./build-if-stale.mjs";
import { listening } from "./test-ports.mjs";

const env = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };
const { embedded, servers, redisDown } = environments;

function fail(message) {
  console.error(`\ne2e: ${message}\n`);
  process.exit(1);
}

async function recreateDatabase() {
  const name = new URL(servers.databaseUrl).pathname.slice(1);
  const admin = new pg.Client({ connectionString: servers.adminDatabaseUrl, connectionTimeoutMillis: 5_000 });
  try {
    await admin.connect();
  } catch (err) {
    fail(`PostgreSQL is not reachable at ${servers.adminDatabaseUrl} (${err.message}); the e2e tests need it.`);
  }
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  console.log(`e2e: database ${name} recreated`);
}

/** Deletes the test prefix's keys (every key starts with the hash tag `{<prefix>:<bucket>}`). */
async function clearRedisPrefix() {
  const redis = new Redis(servers.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 5_000, retryStrategy: () => null });
  redis.on("error", () => {});
  try {
    await redis.connect();
  } catch (err) {
    fail(`Redis is not reachable at ${servers.redisUrl} (${err.message}); the e2e tests need it.`);
  }
  let deleted = 0;
  try {
    for await (const keys of redis.scanStream({ match: `{${servers.redisPrefix}:*`, count: 1000 })) {
      if (keys.length > 0) deleted += await redis.unlink(...keys);
    }
  } finally {
    redis.disconnect();
  }
  console.log(`e2e: redis prefix ${servers.redisPrefix} cleared (${deleted} keys)`);
}

// Wiping a data directory under a running server would corrupt it; refuse instead.
for (const { port } of [embedded, servers, redisDown]) {
  if (await listening(port)) fail(`something is already listening on 127.0.0.1:${port}; stop it (the e2e run starts its own servers).`);
}
await Promise.all(
  [embedded, servers, redisDown, { dataDir: ".data/e2e-sessions" }].map(({ dataDir }) => rm(path.join(ROOT, dataDir), { recursive: true, force: true })),
);
// each server reads its own copy of the e2e configuration file (e2e/config-reload.spec.ts breaks it and reloads)
await Promise.all(
  [embedded, servers, redisDown].map(async ({ dataDir }) => {
    await mkdir(path.join(ROOT, dataDir), { recursive: true });
    await copyFile(path.join(ROOT, "e2e", "idemgate.config.yaml"), path.join(ROOT, dataDir, "idemgate.config.yaml"));
  }),
);
await recreateDatabase();
await clearRedisPrefix();
await buildIfStale(env);

const playwright = path.join(ROOT, "node_modules", "@playwright", "test", "cli.js");
process.exit(await run(process.execPath, [playwright, "test", ...process.argv.slice(2)], { env }));
