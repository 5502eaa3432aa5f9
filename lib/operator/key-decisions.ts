import { randomUUID } from "node:crypto";
import type { KeyDecision as PendingRow, Prisma, PrismaClient } from "@/generated/prisma/client";
import { recordOperatorAction, recordSnapshot, type OperatorActionInput } from "@/lib/audit/operator-actions";
import { isIdemgateError } from "@/lib/idempotency/errors";
import { stateOf, type KeyRecord } from "@/lib/idempotency/record";
import { closeKeyAnomalies, type KeyDecision } from "./close-key-anomalies";
import type { Runtime } from "@/lib/server/runtime";

/** What writing and carrying out decisions needs of the runtime. */
type KeyRuntime = Pick<Runtime, "db" | "store" | "engine">;

/**
 * Every decision about a held key goes to the audit log before the key store acts on it:
 * 1. the decision is written (key_decisions), naming the execution it decides;
 * 2. the engine carries it out in the key store and closes the execution in the log;
 * 3. the operator trail records it, in the transaction that deletes the written decision.
 * A process that stops between 1 and 3 leaves the decision behind; the reconciler carries it out
 * (finishKeyDecisions), so the log never keeps saying "unknown" about a key the store has decided,
 * and a key-store loss restores the decision, not the held call.
 */
export interface DecisionIntent {
  scope: string;
  key: string;
  decision: KeyDecision;
  actor: string;
  reason: string;
  force?: boolean;
  /** resolved: the result and how long it is replayed */
  result?: { status: number; body: unknown; ttlMs: number };
}

/**
 * Step 1: writes the decision about the call that holds the key now (held again from the log when
 * the store lost it, as the engine's decisions do). Returns its id, or null when no call holds the
 * key (the engine's refusal, or its decision in the log alone, follows).
 */
export async function writeDecision(runtime: KeyRuntime, intent: DecisionIntent): Promise<string | null> {
  const held = (await runtime.store.get(intent.scope, intent.key)) ?? (await runtime.engine.restoreHeld(intent.scope, intent.key));
  if (!held?.executionId || held.status === "done") return null;
  const id = randomUUID();
  await runtime.db.prisma.keyDecision.create({
    data: {
      id,
      scope: intent.scope,
      key: intent.key,
      executionId: held.executionId,
      decision: intent.decision,
      actor: intent.actor,
      reason: intent.reason,
      force: intent.force ?? false,
      resultStatus: intent.result?.status ?? null,
      resultBody: intent.result ? JSON.stringify(intent.result.body ?? null) : null,
      ttlMs: intent.result ? BigInt(intent.result.ttlMs) : null,
      stateBefore: (recordSnapshot(held) ?? undefined) as Prisma.InputJsonValue | undefined,
      createdAt: new Date(),
    },
  });
  return id;
}

/** The engine refused the decision (the key changed, a call still running): nothing to carry out. */
export async function dropDecision(prisma: PrismaClient, id: string | null): Promise<void> {
  if (id) await prisma.keyDecision.deleteMany({ where: { id } });
}

/**
 * Step 2 around the engine's decision: a refusal drops the written decision; any other failure
 * (a store or log that stopped answering half-way) leaves it for the reconciler to carry out.
 */
export async function carryOutDecision<T>(prisma: PrismaClient, id: string | null, act: () => Promise<T>): Promise<T> {
  try {
    return await act();
  } catch (err) {
    if (isRefusal(err)) await dropDecision(prisma, id);
    throw err;
  }
}

/** The engine said no (the key changed, a call still running, nothing to decide): nothing was done. */
export function isRefusal(err: unknown): boolean {
  return isIdemgateError(err) && !isIdemgateError(err, "unavailable");
}

/**
 * Step 3: the trail's row, written with the deletion of the decision, so exactly one of the
 * deciding process and the reconciler records it. Returns the row's id, or null when the
 * reconciler has recorded it already.
 */
export async function recordDecided(prisma: PrismaClient, id: string | null, action: OperatorActionInput): Promise<string | null> {
  if (!id) return recordOperatorAction(prisma, action);
  return prisma.$transaction(async (tx) => {
    const taken = await tx.keyDecision.deleteMany({ where: { id } });
    return taken.count === 1 ? recordOperatorAction(tx, action) : null;
  });
}

/** How the reconciler names itself in the trail of a decision it carried out. */
const FINISHED = "carried out by the reconciler: the process that decided stopped before recording it";

/**
 * Decisions written before `before` and never recorded: their process stopped between writing
 * them and recording them. Each is carried out as far as it got (the key store may hold it, or
 * not yet, or have lost it) and recorded as its actor's, with its reason. Returns how many.
 */
export async function finishKeyDecisions(runtime: KeyRuntime, before: Date, limit = 100): Promise<number> {
  const prisma = runtime.db.prisma;
  const pending = await prisma.keyDecision.findMany({ where: { createdAt: { lt: before } }, orderBy: { createdAt: "asc" }, take: limit });
  let finished = 0;
  for (const p of pending) {
    const after = await carryOut(runtime, p);
    if (after === "refused") {
      await dropDecision(prisma, p.id);
      continue;
    }
    const reason = `${p.reason} (${FINISHED})`;
    const recorded = await recordDecided(prisma, p.id, {
      actor: p.actor,
      action: p.decision === "resolved" ? "resolve" : "release",
      reason,
      scope: p.scope,
      key: p.key,
      before: p.stateBefore ?? undefined,
      after: { ...((recordSnapshot(after) as Record<string, unknown> | null) ?? { state: "absent" }), ...(p.force ? { forced: true } : {}), finishedBy: "reconciler" },
    });
    if (recorded === null) continue;
    await closeKeyAnomalies(prisma, { scope: p.scope, key: p.key, actor: p.actor, reason, decision: p.decision as KeyDecision });
    finished++;
  }
  return finished;
}

/**
 * A decision as far as its process got: the key store's record says which steps are left.
 * Returns the key's record afterwards, or "refused" when the decision no longer applies.
 */
async function carryOut(runtime: KeyRuntime, p: PendingRow): Promise<KeyRecord | null | "refused"> {
  const record = await runtime.store.get(p.scope, p.key);
  const execution = await runtime.db.prisma.execution.findUnique({ where: { id: p.executionId }, select: { outcome: true, resultBody: true } });
  if (execution?.outcome === p.decision) {
    // the store and the log carry it already: only the trail is left; a resolve with another
    // result was someone else's decision, and this one never applied
    return p.decision === "resolved" && execution.resultBody !== p.resultBody ? "refused" : record;
  }
  const decision = { scope: p.scope, key: p.key, actor: p.actor, reason: p.reason, force: p.force };
  const result = p.resultBody === null ? null : { status: p.resultStatus ?? 200, body: p.resultBody, final: false };
  if (record && record.executionId === p.executionId && record.status === "done") {
    // a resolve reached the store: only the log is left. A release that meets its call done was
    // never carried out (the call completed first; the engine would have refused it).
    if (p.decision !== "resolved" || !record.result) return "refused";
    await runtime.engine.recordDecided(p.executionId, "resolved", p.reason, { ...record.result, expiresAt: new Date(record.expiresAtMs ?? Date.now()) });
    return record;
  }
  if (record && record.executionId !== p.executionId && stateOf(record, Date.now()) !== "expired") {
    // Another call holds the key: the decision reached the store (a call the log holds open keeps
    // its key even through a key-store loss, so only the decision can have freed it). The log is left.
    await runtime.engine.recordDecided(
      p.executionId,
      p.decision === "resolved" ? "resolved" : "released",
      p.reason,
      result ? { ...result, expiresAt: new Date(p.createdAt.getTime() + Number(p.ttlMs ?? 0)) } : undefined,
    );
    return record;
  }
  // The store holds the call still (the decision did not reach it, or a key-store loss had it held
  // again from the log), or nothing (released, or lost): the engine carries the decision out, once.
  try {
    if (p.decision === "resolved") {
      const out = await runtime.engine.resolve({
        ...decision,
        ...(record ? { token: record.token } : {}),
        result: result ? JSON.parse(result.body) : null,
        status: result?.status ?? 200,
        ttlMs: Number(p.ttlMs ?? 0),
      });
      return out.after;
    }
    await runtime.engine.release({ ...decision, ...(record ? { token: record.token } : {}) });
    return null;
  } catch (err) {
    if (isRefusal(err)) return "refused";
    throw err;
  }
}
