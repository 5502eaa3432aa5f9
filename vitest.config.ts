import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: { tsconfigPaths: true },
  test: {
    include: ["lib/**/*.test.ts", "cli/**/*.test.ts", "app/**/*.test.ts", "test/**/*.test.ts"],
    exclude: ["e2e/**", ".next/**", "node_modules/**"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
