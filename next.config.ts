import type { NextConfig } from "next";
import { SECURITY_HEADERS } from "./lib/http/security-headers";

const nextConfig: NextConfig = {
  serverExternalPackages: ["ioredis", "@electric-sql/pglite", "@node-rs/argon2", "fs-native-extensions"],
  poweredByHeader: false,
  // the build checks the app's own code; `npm run typecheck` checks everything (tests, bench, CLI)
  typescript: { tsconfigPath: "tsconfig.build.json" },
  // every page and route; scripts/serve.mjs also sets them on whatever it hands to Next.js
  async headers() {
    return [{ source: "/:path*", headers: Object.entries(SECURITY_HEADERS).map(([key, value]) => ({ key, value })) }];
  },
  outputFileTracingIncludes: { "/*": ["./lib/store/redis/scripts/**/*.lua", "./prisma/migrations/**/*.sql", "./docs/*.md"] },
};

export default nextConfig;
