import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: { tsconfigPaths: true },
  test: {
    // migrates one PostgreSQL database and one embedded database that the test databases are copied from
    globalSetup: ["test/support/global-setup.ts"],
    include: ["lib/**/*.test.ts", "cli/**/*.test.ts", "app/**/*.test.ts", "test/**/*.test.ts"],
    // the fault suite needs the production build: vitest.faults.config.ts, `npm run test:faults`
    exclude: ["e2e/**", ".next/**", "node_modules/**", "test/faults/**"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    fileParallelism: false,
    // tests use the demo tools through lib/tools/config.ts whatever DATABASE_URL the shell exports
    env: { IDEMGATE_DEMO_TOOLS: "1" },
  },
});
