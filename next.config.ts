import type { NextConfig } from "next";

const nextConfig: NextConfig = {
  serverExternalPackages: ["ioredis", "@electric-sql/pglite", "@node-rs/argon2", "pino"],
  poweredByHeader: false,
  outputFileTracingIncludes: { "/*": ["./lib/store/redis/scripts/*.lua", "./prisma/migrations/**/*.sql"] },
};

export default nextConfig;
