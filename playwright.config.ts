import { defineConfig, devices } from "@playwright/test";
import { METRICS_TOKEN, VIEWER } from "./e2e/accounts";
import { MCP_SERVERS } from "./e2e/mcp-servers";
import { CONFIG_SECRETS, upstreamTools } from "./e2e/upstream";
import environments from "./e2e/environments.mjs";
import { WEBHOOK_PORTS, WEBHOOK_SECRET } from "./e2e/webhook-receiver";

// Two server configurations, each its own `node scripts/serve.mjs` (the production server) with its own data:
// - embedded: nothing configured, PGlite under .data/ for both the key store and the audit log;
// - servers: Redis key store and PostgreSQL audit database (scripts/e2e.mjs recreates both);
// - redisDown: REDIS_URL points at a closed port, for the status page's error state only.
// embedded and servers also guard two MCP servers (e2e/mcp-servers.ts): one over stdio, one that is down.
// Run through `npm run test:e2e`, which wipes the data and builds first.
//
// Where a new spec runs:
// - every spec runs on "embedded" (the whole UI suite), except those in SERVERS_ONLY below;
// - on "servers" too when what it tests depends on the key store or the database: a spec named in
//   BOTH_CONFIGURATIONS below, or a single test tagged `{ tag: "@both-stores" }`;
// - a UI spec whose behaviour does not depend on the stores runs once, on one configuration: each
//   configuration is one worker, and the suite takes as long as the longer of the two, so the long
//   UI-only specs named in SERVERS_ONLY run on "servers" instead of "embedded".
// - signing in: a setup project per server signs the operator and the viewer in once through the
//   form (e2e/auth.setup.ts); signIn()/signInAsOperator() (e2e/auth.ts, e2e/sign-in.ts) then hand
//   the page that session, and the plain `request` fixture stays anonymous. A test ABOUT signing in
//   or out fills the form itself (signInThroughForm), so it never ends the shared session.
// - screenshots: taken on failure; the ones a test takes itself are those the docs and reviews use.
const { embedded, servers, redisDown } = environments;
const byProject = { embedded, servers, "redis-down": redisDown };

// The specs whose behaviour depends on the stores, run on both configurations; plus, from the
// others, the tests tagged @both-stores (a console smoke test).
const BOTH_CONFIGURATIONS = /(gateway|unknown|status|security|config-file|config-reload|tokens|webhooks|audit|search|saved-views|runs)\.spec\.ts/;
// UI-only specs run on "servers" alone, which balances the two workers: the accessibility scan
// (every page at two widths) and the docs pages.
const SERVERS_ONLY = /(accessibility|docs)\.spec\.ts/;

const chromium = {
  ...devices["Desktop Chrome"],
  launchOptions: {
    executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-dev-shm-usage",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  },
};

// A short demo lease makes a simulated crash a stuck key within seconds.
// Every server also seeds a read-only account for the console tests (lib/process/seed.ts).
const common = {
  NEXT_TELEMETRY_DISABLED: "1",
  IDEMGATE_DEMO_LEASE_MS: "3000",
  // the tests make their own traffic and count it
  IDEMGATE_DEMO_TRAFFIC: "0",
  // the tests call the demo tools, which DATABASE_URL (the "servers" configuration) turns off by default
  IDEMGATE_DEMO_TOOLS: "1",
  // no background reconciler: it would settle the tests' stuck and unknown keys by probing their
  // tools at a moment of its choosing; the tests start passes themselves ("Run reconciler now")
  IDEMGATE_RECONCILE_INTERVAL_MS: "0",
  IDEMGATE_SEED_VIEWER_PASSWORD: VIEWER.password,
  IDEMGATE_METRICS_TOKEN: METRICS_TOKEN,
  // a tool declared in a configuration file (e2e/idemgate.config.yaml, copied into each server's data
  // directory by scripts/e2e.mjs), its secrets from the environment (e2e/config-file.spec.ts)
  E2E_CRM_API_KEY: CONFIG_SECRETS.apiKey,
  E2E_CRM_TOKEN: CONFIG_SECRETS.token,
  // the configuration file's webhook endpoint (e2e/webhooks.spec.ts)
  E2E_WEBHOOK_SECRET: WEBHOOK_SECRET,
};

export default defineConfig({
  testDir: "e2e",
  outputDir: "test-results",
  // the configurations run side by side, each on its own server with its own data and upstream
  // service, one test at a time per configuration (a project's tests share its server's state)
  fullyParallel: false,
  forbidOnly: !!process.env.CI,
  // in CI a failed test runs once more and is reported "flaky" when the second run passes: two cores
  // shared with the fault suite make a rare timing loss; a test that fails twice fails the run
  retries: process.env.CI ? 1 : 0,
  workers: 3,
  reporter: process.env.CI ? [["list"]] : [["list"], ["html", { open: "never" }]],
  // bounds, not waits: a passing test takes what it takes; on two busy cores (the fault suite runs
  // beside this one) a page can take seconds, and a bound it meets only on a quiet machine is a flaky test
  timeout: 60_000,
  use: { screenshot: "only-on-failure" },
  expect: { timeout: 20_000 },
  projects: [
    ...(["embedded", "servers", "redis-down"] as const).map((name) => ({
      name: `setup-${name}`,
      workers: 1,
      testMatch: /auth\.setup\.ts/,
      use: { ...chromium, baseURL: `http://127.0.0.1:${byProject[name].port}` },
      metadata: { dataDir: byProject[name].dataDir },
    })),
    {
      name: "embedded",
      workers: 1,
      testIgnore: [/degraded/, SERVERS_ONLY],
      dependencies: ["setup-embedded"],
      use: { ...chromium, baseURL: `http://127.0.0.1:${embedded.port}` },
      metadata: { ...embedded.expect, dataDir: embedded.dataDir },
    },
    {
      name: "servers",
      workers: 1,
      // grep sees the file name too: every test of those specs, and the tagged ones anywhere
      grep: [BOTH_CONFIGURATIONS, SERVERS_ONLY, /@both-stores/],
      testIgnore: /degraded/,
      dependencies: ["setup-servers"],
      use: { ...chromium, baseURL: `http://127.0.0.1:${servers.port}` },
      metadata: { ...servers.expect, dataDir: servers.dataDir },
    },
    {
      name: "redis-down",
      workers: 1,
      testMatch: /degraded\.spec\.ts/,
      dependencies: ["setup-redis-down"],
      use: { ...chromium, baseURL: `http://127.0.0.1:${redisDown.port}` },
      metadata: { ...redisDown.expect, dataDir: redisDown.dataDir },
    },
  ],
  webServer: [
    {
      command: `node scripts/serve.mjs -p ${embedded.port} -H 127.0.0.1`,
      url: `http://127.0.0.1:${embedded.port}/api/health`,
      reuseExistingServer: !process.env.CI,
      timeout: 120_000,
      stdout: "pipe",
      // blank values override anything the developer's shell exports
      env: { ...common, IDEMGATE_UPSTREAM_TOOLS: upstreamTools("embedded"), IDEMGATE_DATA_DIR: embedded.dataDir, IDEMGATE_CONFIG: `${embedded.dataDir}/idemgate.config.yaml`, E2E_WEBHOOK_PORT: String(WEBHOOK_PORTS.embedded), REDIS_URL: "", DATABASE_URL: "", IDEMGATE_MCP_SERVERS: MCP_SERVERS },
    },
    {
      command: `node scripts/serve.mjs -p ${servers.port} -H 127.0.0.1`,
      url: `http://127.0.0.1:${servers.port}/api/health`,
      reuseExistingServer: !process.env.CI,
      timeout: 120_000,
      stdout: "pipe",
      env: {
        ...common,
        IDEMGATE_UPSTREAM_TOOLS: upstreamTools("servers"),
        IDEMGATE_DATA_DIR: servers.dataDir,
        IDEMGATE_CONFIG: `${servers.dataDir}/idemgate.config.yaml`,
        E2E_WEBHOOK_PORT: String(WEBHOOK_PORTS.servers),
        REDIS_URL: servers.redisUrl,
        IDEMGATE_REDIS_PREFIX: servers.redisPrefix,
        DATABASE_URL: servers.databaseUrl,
        IDEMGATE_MCP_SERVERS: MCP_SERVERS,
      },
    },
    {
      command: `node scripts/serve.mjs -p ${redisDown.port} -H 127.0.0.1`,
      // /api/health answers 503 here by design; the status page answers 200 once the server is up
      url: `http://127.0.0.1:${redisDown.port}/status`,
      reuseExistingServer: !process.env.CI,
      timeout: 120_000,
      stdout: "pipe",
      env: { ...common, IDEMGATE_UPSTREAM_TOOLS: upstreamTools("redis-down"), IDEMGATE_DATA_DIR: redisDown.dataDir, REDIS_URL: redisDown.redisUrl, DATABASE_URL: "" },
    },
  ],
});
