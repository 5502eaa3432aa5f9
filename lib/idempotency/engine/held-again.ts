import { ConflictError } from "../errors";
import type { CompleteOutcome } from "../key-store";
import type { KeyRecord, StoredResult } from "../record";
import { beginInput, type CallContext } from "./call";
import { logCall, storeCall, type EngineCore } from "./core";

// Settles of client-run calls whose reservation is no longer as its caller left it, though nobody
// decided about the call: the key store lost it (a Redis flush or restart without persistence), or
// it holds the key again from the audit log as unknown for this very execution (restored after
// such a loss, the call having never reported an outcome). The caller's word, carried by this
// execution's own token, is then what the key stands for. Never after a decision (an operator's, a
// probe's, a takeover: the log then has an outcome for the call, or the key another execution)
// and never for another execution's record.

/** The caller's result for such a reservation: the store's outcome, or null when this does not apply. */
export async function completeHeldAgain(core: EngineCore, call: CallContext, stored: StoredResult, completedMs: number, current: KeyRecord | null): Promise<CompleteOutcome | null> {
  if (current !== null && (current.executionId !== call.executionId || current.status !== "unknown")) return null;
  if (current === null) {
    const token = await holdAgain(core, call, completedMs);
    if (token === null) {
      // the same completion sent again while the first was still being answered (another process
      // may hold the key again for this execution meanwhile): answered from what that one left,
      // or asked to retry while it is storing; never "released or taken over"
      const now = await storeCall(() => core.store.get(call.scope, call.key));
      if (now === null || now.executionId !== call.executionId) return null;
      if (now.status === "inflight") throw new ConflictError(now);
      return { ok: false, reason: "stale_token", current: now };
    }
    const done = await storeCall(() => core.store.complete(call.scope, call.key, token, stored, call.ttlMs, completedMs, { executionId: call.executionId }));
    if (!done.ok) await core.store.abandon(call.scope, call.key, token).catch(() => {});
    return done.ok ? done : null;
  }
  if (!(await openInLog(core, call))) return null;
  const resolved = await storeCall(() => core.store.resolve(call.scope, call.key, stored, call.ttlMs, { nowMs: completedMs, token: current.token }));
  return resolved.ok && resolved.after ? { ok: true, record: resolved.after } : null;
}

/** The caller's not_run for such a reservation: the key is freed (a lost one is free already). Whether it applied. */
export async function releaseHeldAgain(core: EngineCore, call: CallContext, current: KeyRecord | null): Promise<boolean> {
  if (current === null) return (await lostSinceReserved(core, call)) && (await openInLog(core, call));
  if (current.executionId !== call.executionId || current.status !== "unknown" || !(await openInLog(core, call))) return false;
  const released = await storeCall(() => core.store.release(call.scope, call.key, { nowMs: core.now(), token: current.token }));
  return released.ok;
}

/**
 * The caller's unknown for such a reservation: a lost one is held again as unknown for this
 * execution; one held again already stays so. Whether it applied (the log then says so too).
 */
export async function markHeldAgain(core: EngineCore, call: CallContext, current: KeyRecord | null, note: string): Promise<boolean> {
  if (current !== null) return current.executionId === call.executionId && current.status === "unknown" && (await openInLog(core, call));
  const token = await holdAgain(core, call, core.now());
  if (token === null) {
    // the same report sent again while the first was still being answered: as for a completion
    const now = await storeCall(() => core.store.get(call.scope, call.key));
    if (now === null || now.executionId !== call.executionId) return false;
    if (now.status === "inflight") throw new ConflictError(now);
    return now.status === "unknown";
  }
  const marked = await storeCall(() => core.store.markUnknown(call.scope, call.key, token, note, core.now(), { executionId: call.executionId }));
  if (!marked.ok) await core.store.abandon(call.scope, call.key, token).catch(() => {});
  return marked.ok;
}

/**
 * For a settle that found no record under its key: when the key store lost its data since the
 * call was reserved and the log still holds the call open, the key is reserved again for this
 * execution and the token returned (the caller stores what the call said under it); else null.
 */
async function holdAgain(core: EngineCore, call: CallContext, nowMs: number): Promise<number | null> {
  if (!(await lostSinceReserved(core, call)) || !(await openInLog(core, call))) return null;
  const begun = await storeCall(() => core.store.begin(beginInput(call, nowMs)));
  if (begun.kind !== "reserved") return null;
  // read again under the reservation, which keeps decisions and new calls out: one may have come first
  const open = await openInLog(core, call).catch(async (err: unknown) => {
    await core.store.abandon(call.scope, call.key, begun.token).catch(() => {});
    throw err;
  });
  if (open) return begun.token;
  await core.store.abandon(call.scope, call.key, begun.token).catch(() => {});
  return null;
}

/**
 * Whether the key store lost its data where this call's key lives since the call was reserved: an
 * epoch newer than the reservation, or none (nothing held there now). Otherwise a record that is
 * gone was deleted by a decision (a release), which stands. Durable stores never lose one.
 */
async function lostSinceReserved(core: EngineCore, call: CallContext): Promise<boolean> {
  if (!core.store.epochOf) return false;
  const epochMs = await storeCall(() => core.store.epochOf!(call.scope, call.key));
  return epochMs === null || epochMs > call.arrivedMs;
}

/** Whether the log still has this execution without an outcome: nobody, its caller included, has said how it ended. */
async function openInLog(core: EngineCore, call: CallContext): Promise<boolean> {
  const row = await logCall(() => core.audit.execution(call.executionId));
  return row !== null && row.outcome === null && row.token === call.token;
}
