import { InvalidStateError } from "../errors";
import type { OperatorGuard, OperatorRefusal } from "../key-store";
import type { KeyRecord, StoredResult } from "../record";
import { serialize } from "./call";
import type { EngineCore } from "./core";
import { recordFromPrior, restoreFromLog } from "./recover";
import type { OperatorDecision } from "./types";

/**
 * The operator (or the tool's probe) says the side effect did not happen: the next call with the
 * key runs it. Stuck and unknown keys; a running one only with `force`.
 */
export async function release(core: EngineCore, decision: OperatorDecision, restored = false): Promise<{ before: KeyRecord }> {
  const out = await core.store.release(decision.scope, decision.key, guardOf(decision, core.now()));
  if (out.ok) {
    // the execution ends here as far as the log is concerned; if the store later loses data, the
    // released execution no longer blocks the key
    if (out.before.executionId) await core.audit.closeOpenExecution(out.before.executionId, "released", decision.reason);
    return { before: out.before };
  }
  if (out.reason === "absent") {
    // The key store lost the record, but the audit log still holds the call open: held again
    // first, the decision then goes through the store like any other (once)
    const held = restored ? null : await restoredFor(core, decision);
    if (held) return release(core, { ...decision, token: held.token }, true);
    // a call within its lease is not held again (it may still complete): closed in the log only
    // (the key's latest execution however old, as recovery reads it)
    const prior = await core.audit.priorExecution(decision.scope, decision.key, new Date(0));
    // as for a record the store holds: a call still within its lease is released only with force
    if (prior && prior.outcome === null && prior.leaseUntil.getTime() > core.now() && !decision.force) {
      throw refusal("release", "running", recordFromPrior(decision.scope, decision.key, prior, false));
    }
    if (
      prior &&
      (prior.outcome === null || prior.outcome === "unknown") &&
      (decision.token === undefined || decision.token === prior.token) &&
      (await core.audit.closeOpenExecution(prior.id, "released", decision.reason))
    ) {
      return { before: recordFromPrior(decision.scope, decision.key, prior, false) };
    }
  }
  throw refusal("release", out.reason, out.current);
}

/**
 * The operator (or the tool's probe) confirmed the side effect happened: the key is done with the
 * result they supply. Stuck and unknown keys; a running one only with `force`.
 */
export async function resolve(
  core: EngineCore,
  decision: OperatorDecision & { result: unknown; status?: number; ttlMs: number },
  restored = false,
): Promise<{ before: KeyRecord; after: KeyRecord | null }> {
  const stored: StoredResult = { status: decision.status ?? 200, body: serialize(decision.result), final: false };
  const out = await core.store.resolve(decision.scope, decision.key, stored, decision.ttlMs, guardOf(decision, core.now()));
  if (!out.ok && out.reason === "absent" && !restored) {
    // held again from the log first (see release)
    const held = await restoredFor(core, decision);
    if (held) return resolve(core, { ...decision, token: held.token }, true);
  }
  if (!out.ok) throw refusal("resolve", out.reason, out.current);
  if (out.before.executionId) {
    const expiresAt = new Date(out.after?.expiresAtMs ?? core.now() + decision.ttlMs);
    await core.audit.closeOpenExecution(out.before.executionId, "resolved", decision.reason, { ...stored, expiresAt });
  }
  return { before: out.before, after: out.after };
}

/**
 * For a decision about a key the store has no record of: the record held again from the log for
 * the call it names (restoreFromLog), or null. A decision made about a given reservation (`token`:
 * the lost record's, as the log has it, or the restored one's) applies only to that call.
 */
async function restoredFor(core: EngineCore, decision: OperatorDecision): Promise<KeyRecord | null> {
  const restored = await restoreFromLog(core, decision.scope, decision.key, core.now());
  if (!restored || restored.record.status !== "unknown") return null;
  const { record, prior } = restored;
  if (decision.token !== undefined && decision.token !== record.token && decision.token !== prior?.token) return null;
  return record;
}

function guardOf(decision: OperatorDecision, nowMs: number): OperatorGuard {
  return { nowMs, force: decision.force ?? false, ...(decision.token === undefined ? {} : { token: decision.token }) };
}

function refusal(action: string, reason: OperatorRefusal, current: KeyRecord | null): InvalidStateError {
  switch (reason) {
    case "changed":
      return new InvalidStateError(
        `another call holds this key now (it was taken after the one this decision is about); nothing was ${action}d: look at the key again`,
        current,
      );
    case "absent":
      return new InvalidStateError(`there is no record under this key to ${action}`, current);
    case "running":
      return new InvalidStateError(
        `the call holding this key is still running (its lease ends at ${current?.leaseUntilMs ? new Date(current.leaseUntilMs).toISOString() : "an unknown time"}) ` +
          `and may still complete; ${action} it anyway only with force (its late result is then flagged)`,
        current,
      );
    case "not_inflight":
      return new InvalidStateError(`only stuck, unknown or running keys can be ${action}d; this key is ${current?.status ?? "absent"}`, current);
  }
}
