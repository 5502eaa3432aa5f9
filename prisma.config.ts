import { defineConfig } from "prisma/config";

// The CLI runs without downloaded engines: the WebAssembly schema engine through a driver adapter.
// Idemgate applies migrations itself (`idemgate migrate`, and at server start); this config serves
// `prisma generate` and, on a machine with internet, `prisma migrate status`.
export default defineConfig({
  experimental: { adapter: true },
  engine: "js",
  schema: "prisma/schema.prisma",
  async adapter() {
    if (process.env.DATABASE_URL) {
      const { PrismaPg } = await import("@prisma/adapter-pg");
      return new PrismaPg({ connectionString: process.env.DATABASE_URL });
    }
    const { PGlite } = await import("@electric-sql/pglite");
    const { PrismaPGlite } = await import("pglite-prisma-adapter");
    // In memory: the embedded data directory belongs to the running server (see lib/db).
    return new PrismaPGlite(new PGlite());
  },
});
