import { closeKeyAnomalies } from "@/lib/operator/close-key-anomalies";
import { recordSnapshot } from "@/lib/audit/operator-actions";
import { carryOutDecision, recordDecided, writeDecision } from "./key-decisions";
import { InvalidArgumentsError } from "@/lib/idempotency/errors";
import type { KeyRecord } from "@/lib/idempotency/record";
import { DEFAULT_POLICY } from "@/lib/idempotency/tool";
import { requireReason } from "@/lib/audit/operator-actions";
import type { KeyRuntime } from "./release-key";

/**
 * The operator confirmed the side effect happened: the key becomes done with the result they
 * supply, and duplicates get that result from now on. Stuck and unknown keys; a running one only
 * with `force`; with `token`, only while that reservation still holds the key (as releaseKey). The
 * key's open unknown-outcome anomalies are closed by it. The decision is in the audit log before the
 * key store acts on it (key-decisions.ts).
 */
export async function resolveKey(
  runtime: KeyRuntime,
  input: { scope: string; key: string; actor: string; reason: string; result: unknown; status?: number; force?: boolean; token?: number },
): Promise<KeyRecord | null> {
  const reason = requireReason(input.reason);
  if (input.result === undefined) throw new InvalidArgumentsError("a result is required: the response duplicates will get", [{ path: "result", message: "required" }]);
  const status = input.status ?? 200;
  if (!isResultStatus(status)) {
    throw new InvalidArgumentsError("status must be a whole number from 200 to 499", [{ path: "status", message: "out of range" }]);
  }
  const force = input.force ?? false;
  const ttlMs = await resultTtlMs(runtime, input.scope, input.key);
  const decided = await writeDecision(runtime, { scope: input.scope, key: input.key, decision: "resolved", actor: input.actor, reason, force, result: { status, body: input.result, ttlMs } });
  const { before, after } = await carryOutDecision(runtime.db.prisma, decided, () =>
    runtime.engine.resolve({ scope: input.scope, key: input.key, actor: input.actor, reason, result: input.result, status, ttlMs, force, token: input.token }),
  );
  await recordDecided(runtime.db.prisma, decided, {
    actor: input.actor,
    action: "resolve",
    reason,
    scope: input.scope,
    key: input.key,
    before: recordSnapshot(before),
    after: force ? { ...(recordSnapshot(after) as Record<string, unknown> | null), forced: true } : recordSnapshot(after),
  });
  await closeKeyAnomalies(runtime.db.prisma, { scope: input.scope, key: input.key, actor: input.actor, reason, decision: "resolved" });
  return after;
}

/** A status a resolved key may replay: a result or a final error, never a server error. */
export function isResultStatus(status: number): boolean {
  return Number.isInteger(status) && status >= 200 && status <= 499;
}

/**
 * How long a resolved key replays its result: its tool's TTL. A key the store lost while the log
 * holds its call open is held again here (Engine.restoreHeld), so its tool is known.
 */
export async function resultTtlMs(runtime: KeyRuntime, scope: string, key: string): Promise<number> {
  const tool = ((await runtime.store.get(scope, key)) ?? (await runtime.engine.restoreHeld(scope, key)))?.tool;
  return tool && runtime.registry.has(tool) ? runtime.registry.get(tool).ttlMs : DEFAULT_POLICY.ttlMs;
}
