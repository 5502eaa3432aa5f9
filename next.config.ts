import type { NextConfig } from "next";

const nextConfig: NextConfig = {
  serverExternalPackages: ["ioredis", "@electric-sql/pglite", "@node-rs/argon2", "fs-native-extensions"],
  poweredByHeader: false,
  // `npm test` runs `tsc --noEmit` over everything (app, tests, bench, CLI) before it builds, so the
  // build does not type-check the app a second time: ignoreBuildErrors is safe ONLY because that
  // type check runs first and fails the run. Building by hand (`npm run build`, `npm start`) after
  // changing code: run `npm run typecheck` too.
  typescript: { tsconfigPath: "tsconfig.build.json", ignoreBuildErrors: true },
  outputFileTracingIncludes: { "/*": ["./lib/store/redis/scripts/**/*.lua", "./prisma/migrations/**/*.sql", "./docs/*.md"] },
};

export default nextConfig;
