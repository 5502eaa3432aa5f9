import { z } from "zod";
import { closeKeyAnomalies } from "@/lib/operator/close-key-anomalies";
import { recordSnapshot, requireReason } from "@/lib/audit/operator-actions";
import { carryOutDecision, recordDecided, writeDecision } from "./key-decisions";
import type { KeyRecord } from "@/lib/idempotency/record";
import type { Runtime } from "@/lib/server/runtime";

/**
 * A key's fencing token as the client read it (a key view's `token`): sent with a decision, it
 * makes the decision apply only to that reservation's call.
 */
export const ReservationToken = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/** What deciding about a key needs of the runtime. */
export type KeyRuntime = Pick<Runtime, "db" | "store" | "engine" | "registry">;

/**
 * The operator believes the side effect did not happen: delete the reservation so the next retry
 * runs it. Stuck and unknown keys; a running one (inflight within its lease) only with `force`, as
 * its call may still complete. With `token` (the record's, as the operator saw it), only while that
 * reservation still holds the key: a key another call took since is refused. Recorded with the
 * actor, the reason and the state before; the key's open unknown-outcome anomalies are closed by it.
 * The decision is in the audit log before the key store acts on it (key-decisions.ts).
 */
export async function releaseKey(
  runtime: KeyRuntime,
  input: { scope: string; key: string; actor: string; reason: string; force?: boolean; token?: number },
): Promise<KeyRecord> {
  const reason = requireReason(input.reason);
  const force = input.force ?? false;
  const decided = await writeDecision(runtime, { scope: input.scope, key: input.key, decision: "released", actor: input.actor, reason, force });
  const { before } = await carryOutDecision(runtime.db.prisma, decided, () =>
    runtime.engine.release({ scope: input.scope, key: input.key, actor: input.actor, reason, force, token: input.token }),
  );
  await recordDecided(runtime.db.prisma, decided, {
    actor: input.actor,
    action: "release",
    reason,
    scope: input.scope,
    key: input.key,
    before: recordSnapshot(before),
    after: force ? { state: "absent", forced: true } : { state: "absent" },
  });
  await closeKeyAnomalies(runtime.db.prisma, { scope: input.scope, key: input.key, actor: input.actor, reason, decision: "released" });
  return before;
}
