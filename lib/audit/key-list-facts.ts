import { Prisma, type PrismaClient } from "@/generated/prisma/client";

export interface KeyListFacts {
  /** the HTTP status of the result stored for the key's execution (a declined card: 402), if it has one */
  resultStatus: number | null;
  /** duplicates answered with the stored result (replays) */
  replays: number;
}

const factsKey = (scope: string, key: string) => `${scope}\u0000${key}`;

/**
 * What the audit log adds to one page of the keys list: each key's stored status (from its
 * execution's row) and how many replays it answered. Two queries for the whole page, by the
 * executions' ids and the suppressions' (scope, key, at) index.
 */
export async function readKeyListFacts(
  prisma: PrismaClient,
  keys: readonly { scope: string; key: string; executionId: string | null }[],
): Promise<Map<string, KeyListFacts>> {
  const out = new Map<string, KeyListFacts>(keys.map((k) => [factsKey(k.scope, k.key), { resultStatus: null, replays: 0 }]));
  if (keys.length === 0) return out;
  const ids = keys.map((k) => k.executionId).filter((id): id is string => id !== null);
  const pairs = Prisma.join(keys.map((k) => Prisma.sql`(${k.scope}, ${k.key})`));
  const [executions, replays] = await Promise.all([
    ids.length === 0 ? [] : prisma.execution.findMany({ where: { id: { in: ids } }, select: { scope: true, key: true, resultStatus: true } }),
    prisma.$queryRaw<{ scope: string; key: string; n: bigint }[]>(
      Prisma.sql`SELECT scope, key, count(*) AS n FROM suppressions WHERE kind = 'replay' AND (scope, key) IN (${pairs}) GROUP BY scope, key`,
    ),
  ]);
  for (const e of executions) {
    const facts = out.get(factsKey(e.scope, e.key));
    if (facts) facts.resultStatus = e.resultStatus;
  }
  for (const r of replays) {
    const facts = out.get(factsKey(r.scope, r.key));
    if (facts) facts.replays = Number(r.n);
  }
  return out;
}

export { factsKey as keyListFactsKey };
