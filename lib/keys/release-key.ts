import { recordOperatorAction, recordSnapshot } from "@/lib/audit/operator-actions";
import { InvalidArgumentsError } from "@/lib/idempotency/errors";
import type { KeyRecord } from "@/lib/idempotency/record";
import type { Runtime } from "@/lib/runtime";

export const MAX_REASON_LENGTH = 1_000;

export function requireReason(reason: unknown): string {
  const text = typeof reason === "string" ? reason.trim() : "";
  if (text.length < 3) throw new InvalidArgumentsError("a reason is required (at least 3 characters)", [{ path: "reason", message: "required" }]);
  if (text.length > MAX_REASON_LENGTH) throw new InvalidArgumentsError(`the reason is longer than ${MAX_REASON_LENGTH} characters`, [{ path: "reason", message: "too long" }]);
  return text;
}

/**
 * The operator believes the side effect did not happen: delete the reservation so the next retry
 * runs it. Recorded with the actor, the reason and the state before.
 */
export async function releaseKey(runtime: Runtime, input: { scope: string; key: string; actor: string; reason: string }): Promise<KeyRecord> {
  const reason = requireReason(input.reason);
  const { before } = await runtime.engine.release({ ...input, reason });
  await recordOperatorAction(runtime.db.prisma, {
    actor: input.actor,
    action: "release",
    reason,
    scope: input.scope,
    key: input.key,
    before: recordSnapshot(before),
    after: { state: "absent" },
  });
  return before;
}
