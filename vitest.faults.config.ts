import { execFileSync } from "node:child_process";
import { defineConfig } from "vitest/config";

/**
 * The interpreter python3 names, resolved once: the tests start Python processes by the dozen, and
 * behind a version manager's shim (pyenv) each start runs a shell script first (~0.8 CPU-s against
 * ~0.1 s). PYTHON, when set, is used as it is.
 */
function python(): string | undefined {
  if (process.env.PYTHON) return process.env.PYTHON;
  try {
    return execFileSync("python3", ["-c", "import sys; print(sys.executable)"], { encoding: "utf8" }).trim() || undefined;
  } catch {
    return undefined; // the Python tests then fail on "python3" themselves, loudly
  }
}
const PYTHON = python();

// The fault suite runs real servers from the production build: `npm run test:faults` builds first.
export default defineConfig({
  resolve: { tsconfigPaths: true },
  test: {
    // the test databases in-process (createTestPostgres) are copies of one migrated once
    globalSetup: ["test/support/global-setup.ts"],
    // and the embedded servers' first starts a copy of the run's migrated database (test/support/server.ts)
    setupFiles: ["test/support/fault-setup.ts"],
    include: ["test/faults/**/*.test.ts"],
    testTimeout: 180_000,
    hookTimeout: 180_000,
    // each file's servers, ports (scripts/test-ports.mjs), databases and Redis prefixes are its own;
    // the files mostly wait on servers, leases and killed processes (about 0.6 CPU-s per second of
    // wall time beside the e2e suite), so three run at a time
    maxWorkers: Number(process.env.VITEST_MAX_WORKERS) || 3,
    // the servers (test/support/server.ts) and in-process registries use the demo tools, with DATABASE_URL too
    env: { IDEMGATE_DEMO_TOOLS: "1", ...(PYTHON ? { PYTHON } : {}) },
  },
});
