/**
 * Recovery from the audit log: what a key store that can lose data (Redis without persistence, a
 * flush, a failover) lost is read back from the log, which still knows every execution and result.
 */
import { OPEN_CALL_RECOVERY_MS, type PriorExecution } from "../audit-port";
import { UnavailableError } from "../errors";
import { FALLBACK_PREFIX, PASS_THROUGH_PREFIX } from "../key-rules";
import type { KeyRecord } from "../record";
import { appliedNothing, heldOpen, keepsResult } from "../transitions";
import type { CallContext } from "./call";
import type { EngineCore } from "./core";
import { suppressed } from "./suppress";
import type { InvokeResult } from "./types";

/**
 * How long after its reservation an intent can still be on its way to the log (the database
 * connection timeout is 5 s): a recovery window computed later has seen every intent from before
 * the epoch.
 */
const INTENT_SETTLE_MS = 10_000;

/** How long after a key-store loss the audit log may still hold what the store lost for a key. */
function recoveryHorizonMs(ttlMs: number): number {
  return Math.max(ttlMs, OPEN_CALL_RECOVERY_MS);
}

/**
 * For a call just reserved on a part of the key store that holds data only since `epochMs`: when
 * the audit log may know what the store lost for its key, the answer from the log (see
 * recoverFromAudit), or null when nothing recorded stands in the way.
 */
export async function recoverLost(core: EngineCore, call: CallContext, token: number, epochMs: number): Promise<InvokeResult | null> {
  // a result lost with the store matters for its TTL, an unfinished call for longer
  if (call.arrivedMs - epochMs >= recoveryHorizonMs(call.ttlMs)) return null;
  let wanted: boolean;
  try {
    // asked once per epoch: on a fresh store it answers no, and no call pays a lookup
    wanted = await recoveryWanted(core, epochMs, call.arrivedMs);
  } catch (err) {
    await core.store.abandon(call.scope, call.key, token).catch(() => {});
    throw new UnavailableError("audit_log", err);
  }
  return wanted ? recoverFromAudit(core, call, token) : null;
}

/**
 * Whether the audit log may know of results recorded before this store epoch that are still
 * wanted; rejects when the audit log cannot be read.
 */
async function recoveryWanted(core: EngineCore, epochMs: number, arrivedMs: number): Promise<boolean> {
  // A call that reserved just before the loss may not have written its intent yet, so a window
  // computed now could miss it: until intents from before the epoch have settled, look every
  // key up (one indexed read per first execution, for the first seconds of a store epoch).
  if (arrivedMs < epochMs + INTENT_SETTLE_MS) return true;
  let end = core.recoveryEnds.get(epochMs);
  if (!end) {
    if (core.recoveryEnds.size > 1_000) core.recoveryEnds.clear();
    end = core.audit.recoveryWindowEnd(epochMs);
    core.recoveryEnds.set(epochMs, end);
    end.catch(() => core.recoveryEnds.delete(epochMs));
  }
  const until = await end;
  return until !== null && arrivedMs < until;
}

/**
 * After a key-store loss: the latest execution the audit log has for the key decides. A stored
 * result is written back under the reservation and replayed; an execution without an outcome
 * keeps the key blocked (inflight, then stuck) as its lost record would have, and one whose
 * outcome was unknown blocks it as unknown again; other arguments are a mismatch. Returns null
 * when nothing recorded stands in the way.
 */
async function recoverFromAudit(core: EngineCore, call: CallContext, token: number): Promise<InvokeResult | null> {
  const fp = call.fingerprint;
  let prior: PriorExecution | null;
  try {
    // the key's latest execution however old: a call that never finished holds its key whatever
    // its age (an expired result found there is ignored below)
    prior = await core.audit.priorExecution(call.scope, call.key, new Date(0));
  } catch (err) {
    await core.store.abandon(call.scope, call.key, token).catch(() => {});
    throw new UnavailableError("audit_log", err);
  }
  // succeeded, final_error, late_completion (as the latest execution, no other one ran after it)
  // and resolved left a result; open and unknown calls still block
  if (!prior || appliedNothing(prior.outcome)) return null;
  const record = recordFromPrior(call.scope, call.key, prior, call.fallback);
  if (heldOpen(prior, call.arrivedMs) && prior.fingerprint === fp) {
    // the record stands for that execution (this call writes no intent): a decision about the
    // key closes it in the log, and a probe is asked about it
    const marked = await holdAsUnknown(core, call.scope, call.key, token, prior, call.arrivedMs);
    return suppressed(core, "unknown", marked ?? { ...record, status: "unknown", outcomeNote: heldNote(prior) }, call);
  }
  const keeps = keepsResult(prior, call.arrivedMs);
  if (prior.fingerprint === fp && keeps) {
    const result = { status: prior.resultStatus ?? 200, body: prior.resultBody!, final: prior.resultFinal ?? false };
    const restored = await core.store
      .complete(call.scope, call.key, token, result, prior.expiresAt!.getTime() - call.arrivedMs, call.arrivedMs, { executionId: prior.id })
      .catch(() => null);
    return suppressed(core, "replay", restored?.ok ? restored.record : { ...record, result }, call);
  }
  if (prior.outcome !== null && prior.outcome !== "unknown" && !keeps) return null;
  await core.store.abandon(call.scope, call.key, token).catch(() => {});
  if (prior.fingerprint !== fp) return suppressed(core, "mismatch", record, call);
  return suppressed(core, prior.leaseUntil.getTime() > call.arrivedMs ? "conflict" : "stuck", record, call);
}

/**
 * Whether a retry of an execution's call (the same arguments), arriving at `nowMs` while the key
 * store has no record under its key, gets the execution's result back from the audit log (and
 * the store the record again) instead of running: the store can lose data, a reservation there
 * now would consult the log (as reserve does), and the key's latest execution in the log is this
 * one with its result kept. A durable store never consults the log: there a retry runs.
 */
export async function retryRestores(core: EngineCore, scope: string, key: string, executionId: string, nowMs: number): Promise<boolean> {
  if (!core.store.epochOf) return false;
  const prior = await core.audit.priorExecution(scope, key, new Date(0));
  if (!prior || prior.id !== executionId || !keepsResult(prior, nowMs)) return false;
  // no epoch: the store holds nothing there now, and the reservation starts a new one
  const epochMs = (await core.store.epochOf(scope, key)) ?? nowMs;
  const ttlMs = prior.expiresAt!.getTime() - (prior.finishedAt ?? prior.startedAt).getTime();
  return nowMs - epochMs < recoveryHorizonMs(ttlMs) && (await recoveryWanted(core, epochMs, nowMs));
}

/**
 * After a key-store loss, what a retry does for a call the audit log holds open (its outcome was
 * unknown, or it never reported one and its lease passed) while the store has no record under its
 * key, done without a retry: the key is reserved and held as unknown for that execution, so the
 * store's lists, counts, probes and operator decisions see it. Returns the key's record now (the
 * restored one, or whatever holds the key) with the execution it was restored for (null: the key
 * was held already), or null when the log holds no such call for the key.
 */
export async function restoreFromLog(core: EngineCore, scope: string, key: string, nowMs: number): Promise<{ record: KeyRecord; prior: PriorExecution | null } | null> {
  if (key.startsWith(PASS_THROUGH_PREFIX)) return null;
  const seen = await core.audit.priorExecution(scope, key, new Date(0));
  if (!seen || !heldOpen(seen, nowMs)) return null;
  const begun = await core.store.begin({
    scope,
    key,
    tool: seen.tool,
    fingerprint: seen.fingerprint,
    leaseMs: Math.max(1, seen.leaseUntil.getTime() - seen.startedAt.getTime()),
    nowMs,
    fallback: key.startsWith(FALLBACK_PREFIX),
    session: seen.session,
    executionId: seen.id,
    takeoverStuck: false,
    retryUnknown: false,
  });
  if (begun.kind !== "reserved") return { record: begun.record, prior: null };
  // read again under the reservation, which keeps new calls out: the call may have ended meanwhile
  const prior = await core.audit.priorExecution(scope, key, new Date(0)).catch(async (err: unknown) => {
    await core.store.abandon(scope, key, begun.token).catch(() => {});
    throw err;
  });
  const record = prior && prior.id === seen.id && heldOpen(prior, nowMs) ? await holdAsUnknown(core, scope, key, begun.token, prior, nowMs) : null;
  if (!record) {
    await core.store.abandon(scope, key, begun.token).catch(() => {});
    return null;
  }
  return { record, prior };
}

/**
 * The one way a key is held again from the log after a key-store loss: the reservation under
 * `token` becomes an unknown record standing for the execution the log holds open.
 */
async function holdAsUnknown(core: EngineCore, scope: string, key: string, token: number, prior: PriorExecution, nowMs: number): Promise<KeyRecord | null> {
  const unknownAtMs = prior.outcome === "unknown" ? (prior.finishedAt?.getTime() ?? nowMs) : prior.leaseUntil.getTime();
  const marked = await core.store.markUnknown(scope, key, token, heldNote(prior), unknownAtMs, { executionId: prior.id }).catch(() => null);
  return marked?.ok ? marked.record : null;
}

/** Why a key held again from the log is unknown, as its record says. */
function heldNote(prior: PriorExecution): string {
  if (prior.outcome === "unknown") return prior.error ?? "the outcome of its call was unknown";
  return `its call never reported an outcome before its lease ended at ${prior.leaseUntil.toISOString()}, and the key store lost its reservation`;
}

/** The record a lost key would have, rebuilt from its execution in the audit log. */
export function recordFromPrior(scope: string, key: string, prior: PriorExecution, fallback: boolean): KeyRecord {
  const open = prior.outcome === null;
  const unknown = prior.outcome === "unknown";
  return {
    scope,
    key,
    tool: prior.tool,
    fingerprint: prior.fingerprint,
    status: open ? "inflight" : unknown ? "unknown" : "done",
    token: prior.token,
    createdAtMs: prior.startedAt.getTime(),
    leaseUntilMs: open || unknown ? prior.leaseUntil.getTime() : null,
    completedAtMs: null,
    expiresAtMs: prior.expiresAt?.getTime() ?? null,
    result: null,
    fallback,
    session: prior.session,
    executionId: prior.id,
    outcomeNote: unknown ? prior.error : null,
    unknownAtMs: unknown ? (prior.finishedAt?.getTime() ?? null) : null,
  };
}
