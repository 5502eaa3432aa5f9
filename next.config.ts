import type { NextConfig } from "next";

const nextConfig: NextConfig = {
  serverExternalPackages: ["ioredis", "@electric-sql/pglite", "@node-rs/argon2", "fs-native-extensions"],
  poweredByHeader: false,
  // the build checks the app's own code; `npm run typecheck` checks everything (tests, bench, CLI)
  typescript: { tsconfigPath: "tsconfig.build.json" },
  outputFileTracingIncludes: { "/*": ["./lib/store/redis/scripts/**/*.lua", "./prisma/migrations/**/*.sql", "./docs/*.md"] },
};

export default nextConfig;
