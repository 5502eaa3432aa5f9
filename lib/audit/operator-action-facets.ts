import type { PrismaClient } from "@/generated/prisma/client";

/** The actors and actions present in the trail, for the audit page's filter menus. */
export async function operatorActionFacets(prisma: PrismaClient): Promise<{ actors: string[]; actions: string[] }> {
  const [actors, actions] = await Promise.all([
    prisma.operatorAction.findMany({ distinct: ["actor"], select: { actor: true }, orderBy: { actor: "asc" }, take: 500 }),
    prisma.operatorAction.findMany({ distinct: ["action"], select: { action: true }, orderBy: { action: "asc" }, take: 100 }),
  ]);
  return { actors: actors.map((a) => a.actor), actions: actions.map((a) => a.action) };
}
