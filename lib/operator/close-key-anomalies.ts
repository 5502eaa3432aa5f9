import type { PrismaClient } from "@/generated/prisma/client";
import { recordOperatorAction } from "@/lib/audit/operator-actions";

/** What was decided about a key: its side effect did not happen (released) or did (resolved). */
export type KeyDecision = "released" | "resolved";

/**
 * A key was released or resolved (by an operator on any page, the command line, a bulk release or
 * a status probe): its open unknown-outcome anomalies are answered by that decision, so they are
 * resolved and the trail says by whom and why. Acknowledged ones are left to whoever took them on.
 * The arguments a `probe: resend` tool kept for the key's calls (kept in full, whatever the tool's
 * `arguments` policy, only until the outcome is known) are deleted: it is known now.
 * Returns the ids of the anomalies it closed.
 */
export async function closeKeyAnomalies(
  prisma: PrismaClient,
  input: { scope: string; key: string; actor: string; reason: string; decision: KeyDecision },
): Promise<string[]> {
  await prisma.upstreamResend.deleteMany({ where: { scope: input.scope, key: input.key } });
  const open = await prisma.anomaly.findMany({
    where: { status: "open", type: "orphan_unknown_outcome", scope: input.scope, key: input.key },
    select: { id: true, type: true },
  });
  const closed: string[] = [];
  for (const anomaly of open) {
    // conditional on its status, so an operator changing it at the same moment is not overwritten
    const out = await prisma.anomaly.updateMany({ where: { id: anomaly.id, status: "open" }, data: { status: "resolved", updatedAt: new Date() } });
    if (out.count === 0) continue;
    await recordOperatorAction(prisma, {
      actor: input.actor,
      action: "resolve_anomaly",
      reason: `key ${input.decision} by ${input.actor}: ${input.reason}`,
      scope: input.scope,
      key: input.key,
      anomalyId: anomaly.id,
      before: { status: "open", type: anomaly.type },
      after: { status: "resolved", type: anomaly.type, keyDecision: input.decision },
    });
    closed.push(anomaly.id);
  }
  return closed;
}
