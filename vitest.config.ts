import path from "node:path";
import { defineConfig } from "vitest/config";

// Where a new test file goes:
// - by default it runs in the "parallel" project, beside other files in other workers. That is fine
//   for a file whose databases and Redis keys are its own: createTestPostgres / createTestPglite /
//   openTestStore (test/support/) give each a random database or prefix, copied from the run's
//   migrated templates (test/support/global-setup.ts). Never FLUSHDB/FLUSHALL the shared Redis:
//   flush a RedisProcess of your own (RedisProcess.startOnFreePort()).
// - a file that needs the machine to itself — fixed ports, a Redis Cluster, several processes timed
//   to start together, a bound on elapsed time — goes in SERIAL below: those files run one at a
//   time, after the parallel ones.
const SERIAL = [
  // starts 3 redis-server nodes in cluster mode on ports it looks for from 7101 up
  "test/cluster/**/*.test.ts",
  // processes racing for one data directory's lock at the same moment
  "lib/db/lock.test.ts",
];
// The "parallel" files share their worker's modules (isolate: false): each file's imports are
// evaluated once per worker rather than once per file, which was about a third of the unit tests'
// CPU (Prisma's client, the MCP SDKs, zod schemas). A file that replaces modules (vi.mock of
// anything but server-only, which is aliased to its empty build below) or asserts on state the
// whole process shares (what globalThis holds, "nothing configured in this process") goes in
// ISOLATED: each of those runs with modules of its own, as every file used to.
const ISOLATED = [
  // vi.mock("@/lib/auth/session")
  "lib/anomalies/export-anomalies.test.ts",
  "lib/notifications/redeliver.test.ts",
  "lib/operator/pause-tool.test.ts",
  "lib/console/get-run.test.ts",
  // "no MCP server is configured in this process": another file's upstreams are on globalThis
  "lib/mcp/upstream/console-view.test.ts",
];

const shared = {
  testTimeout: 30_000,
  hookTimeout: 60_000,
  // tests use the demo tools through lib/tools/config.ts whatever DATABASE_URL the shell exports
  env: { IDEMGATE_DEMO_TOOLS: "1" },
};

export default defineConfig({
  // server-only's default export throws outside React's server build: its empty build here, so no
  // test file needs vi.mock("server-only") (which would make it one to isolate)
  resolve: { tsconfigPaths: true, alias: { "server-only": path.resolve(import.meta.dirname, "node_modules/server-only/empty.js") } },
  test: {
    globalSetup: ["test/support/global-setup.ts"],
    // files are mostly waiting on PostgreSQL and Redis: more workers than the 2 cores pay
    maxWorkers: Number(process.env.VITEST_MAX_WORKERS) || 3,
    // the fault suite needs the production build: vitest.faults.config.ts, `npm run test:faults`
    exclude: ["e2e/**", ".next/**", "node_modules/**", "test/faults/**"],
    projects: [
      {
        extends: true,
        test: {
          ...shared,
          name: "parallel",
          isolate: false,
          include: ["lib/**/*.test.ts", "cli/**/*.test.ts", "app/**/*.test.ts", "test/**/*.test.ts"],
          exclude: ["e2e/**", ".next/**", "node_modules/**", "test/faults/**", ...SERIAL, ...ISOLATED],
        },
      },
      { extends: true, test: { ...shared, name: "isolated", include: ISOLATED } },
      {
        extends: true,
        test: { ...shared, name: "serial", include: SERIAL, fileParallelism: false, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
