/**
 * Whether the built-in demo tools are served: IDEMGATE_DEMO_TOOLS=1 or 0 says so; unset, they are on
 * for the embedded default and off when DATABASE_URL is set (a production deployment, where a tool
 * that pretends to charge cards has no place). Read on its own, without the rest of the
 * configuration, because lib/tools/config.ts asks when it is loaded; loadConfig (lib/server/config.ts)
 * refuses other values.
 */
export function demoToolsEnabled(env: Record<string, string | undefined> = process.env): boolean {
  const explicit = env.IDEMGATE_DEMO_TOOLS?.trim();
  if (explicit === "1") return true;
  if (explicit === "0") return false;
  return !env.DATABASE_URL?.trim();
}
