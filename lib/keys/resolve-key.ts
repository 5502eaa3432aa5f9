import { recordOperatorAction, recordSnapshot } from "@/lib/audit/operator-actions";
import { InvalidArgumentsError } from "@/lib/idempotency/errors";
import type { KeyRecord } from "@/lib/idempotency/record";
import { DEFAULT_POLICY } from "@/lib/idempotency/tool";
import type { Runtime } from "@/lib/runtime";
import { requireReason } from "./release-key";

/**
 * The operator confirmed the side effect happened: the key becomes done with the result they
 * supply, and duplicates get that result from now on.
 */
export async function resolveKey(
  runtime: Runtime,
  input: { scope: string; key: string; actor: string; reason: string; result: unknown; status?: number },
): Promise<KeyRecord | null> {
  const reason = requireReason(input.reason);
  if (input.result === undefined) throw new InvalidArgumentsError("a result is required: the response duplicates will get", [{ path: "result", message: "required" }]);
  const status = input.status ?? 200;
  if (!Number.isInteger(status) || status < 200 || status > 499) {
    throw new InvalidArgumentsError("status must be a whole number from 200 to 499", [{ path: "status", message: "out of range" }]);
  }
  const tool = (await runtime.store.get(input.scope, input.key))?.tool;
  const ttlMs = tool && runtime.registry.has(tool) ? runtime.registry.get(tool).ttlMs : DEFAULT_POLICY.ttlMs;
  const { before, after } = await runtime.engine.resolve({ ...input, reason, status, ttlMs });
  await recordOperatorAction(runtime.db.prisma, {
    actor: input.actor,
    action: "resolve",
    reason,
    scope: input.scope,
    key: input.key,
    before: recordSnapshot(before),
    after: recordSnapshot(after),
  });
  return after;
}
