import type { createTestPostgres } from "@/test/support/databases";

type TestPostgres = Awaited<ReturnType<typeof createTestPostgres>>;

/**
 * How the probes fault runs tell what became of a held key. A key with no record was released by a
 * probe's "not applied", or (Redis and PostgreSQL) lost with Redis: after the probe's "applied" (the
 * log restores it: a retry replays), or before any decision (not held again yet: undecided). The
 * operator trail tells which; on the embedded store no record is lost, so none means released.
 */
export function probeDecisions(postgres: () => TestPostgres | null, keyState: (key: string) => Promise<string>) {
  async function probeDecision(key: string): Promise<"resolve" | "release" | null> {
    const pg = postgres();
    if (!pg) return "release";
    const rows = await pg.db.prisma.operatorAction.findMany({ where: { key, action: { in: ["resolve", "release"] } }, orderBy: { at: "desc" }, take: 1 });
    return (rows[0]?.action as "resolve" | "release" | undefined) ?? null;
  }

  async function isDecided(key: string): Promise<boolean> {
    const state = await keyState(key);
    return state === "done" || (state === "absent" && (await probeDecision(key)) !== null);
  }

  return { probeDecision, isDecided };
}
