import type { NextConfig } from "next";
import { SECURITY_HEADERS } from "./lib/http/security-headers";

const nextConfig: NextConfig = {
  serverExternalPackages: ["ioredis", "@electric-sql/pglite", "@node-rs/argon2", "fs-native-extensions"],
  poweredByHeader: false,
  // `npm test` runs `tsc --noEmit` over everything (app, tests, bench, CLI) beside the build, so the
  // build does not type-check the app a second time: ignoreBuildErrors is safe ONLY because that
  // type check runs in the same `npm test` and fails the run. Building by hand (`npm run build`,
  // `npm start`) after changing code: run `npm run typecheck` too.
  typescript: { tsconfigPath: "tsconfig.build.json", ignoreBuildErrors: true },
  // every page and route; scripts/serve.mjs also sets them on whatever it hands to Next.js
  async headers() {
    return [{ source: "/:path*", headers: Object.entries(SECURITY_HEADERS).map(([key, value]) => ({ key, value })) }];
  },
  outputFileTracingIncludes: { "/*": ["./lib/store/redis/scripts/**/*.lua", "./prisma/migrations/**/*.sql", "./docs/*.md"] },
};

export default nextConfig;
