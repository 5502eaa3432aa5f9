import { z } from "zod";
import { closeKeyAnomalies } from "@/lib/operator/close-key-anomalies";
import { recordOperatorAction, recordSnapshot, requireReason } from "@/lib/audit/operator-actions";
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
 */
export async function releaseKey(
  runtime: KeyRuntime,
  input: { scope: string; key: string; actor: string; reason: string; force?: boolean; token?: number },
): Promise<KeyRecord> {
  const reason = requireReason(input.reason);
  const force = input.force ?? false;
  const { before } = await runtime.engine.release({ scope: input.scope, key: input.key, actor: input.actor, reason, force, token: input.token });
  await recordOperatorAction(runtime.db.prisma, {
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
