import { defineConfig } from "vitest/config";

// The fault suite runs real servers from the production build: `npm run test:faults` builds first.
export default defineConfig({
  resolve: { tsconfigPaths: true },
  test: {
    // the test databases in-process (createTestPostgres) are copies of one migrated once
    globalSetup: ["test/support/global-setup.ts"],
    include: ["test/faults/**/*.test.ts"],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    // each file's servers, ports (scripts/test-ports.mjs), databases and Redis prefixes are its own;
    // the files mostly wait on servers, leases and killed processes, so two run at a time
    maxWorkers: Number(process.env.VITEST_MAX_WORKERS) || 2,
    // the servers (test/support/server.ts) and in-process registries use the demo tools, with DATABASE_URL too
    env: { IDEMGATE_DEMO_TOOLS: "1" },
  },
});
