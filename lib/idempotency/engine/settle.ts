import { COMPLETION_NOT_STORED, type OutcomeEntry } from "../audit-port";
import { CallAbandonedError, OutcomeUnknownError, ToolFailedError } from "../errors";
import type { StoredResult } from "../record";
import { beginInput, type CallContext, type Ended, type KeyVerdict } from "./call";
import type { EngineCore } from "./core";
import type { InvokeResult } from "./types";
import { settleWindow } from "./window";

/**
 * Step 5 for every call, whether the gateway ran it or its caller did, once its key was told how
 * it ended (step 4): the advisory window takes the same outcome, the log records it with what the
 * key store said, the call's trace its result, and this process forgets the reservation. An
 * abandoned call writes nothing, as a crashed process would not.
 */
export async function finish(core: EngineCore, call: CallContext, ended: Ended, verdict: KeyVerdict = null): Promise<void> {
  const { trace } = call;
  if (call.runner === "caller") core.held.forget(call.executionId);
  if (ended.class === "abandoned") {
    trace.result = "abandoned";
    return;
  }
  const t = performance.now();
  await settleWindow(core, call, ended);
  trace.storeMs += performance.now() - t;
  core.audit.outcome(outcomeEntry(core, call, ended, verdict));
  trace.result = ended.class === "done" ? (ended.stored.final ? "final_error" : "executed") : ended.class === "unknown" ? "outcome_unknown" : "tool_failed";
}

/** The log's record of how a call ended. */
function outcomeEntry(core: EngineCore, call: CallContext, ended: Exclude<Ended, { class: "abandoned" }>, verdict: KeyVerdict): OutcomeEntry {
  if (ended.class !== "done") {
    const unknown = ended.class === "unknown";
    const meanwhile = verdict === "refused" ? "; the key had been released or taken over meanwhile" : "";
    const answer = unknown ? ended.answer : null;
    return {
      id: call.executionId,
      outcome: unknown ? "unknown" : "failed",
      finishedAt: new Date(core.now()),
      durationMs: ended.durationMs,
      resultStatus: null,
      resultBody: null,
      resultFinal: null,
      expiresAt: null,
      error: unknown ? ended.note + meanwhile : ended.message,
      ...(answer ? { answerStatus: answer.status, answerBody: answer.body } : {}),
    };
  }
  const { stored, atMs } = ended;
  const late = verdict === "refused";
  return {
    id: call.executionId,
    outcome: late ? "late_completion" : stored.final ? "final_error" : "succeeded",
    finishedAt: new Date(atMs),
    durationMs: ended.durationMs,
    resultStatus: stored.status,
    resultBody: stored.body,
    resultFinal: stored.final,
    // a late result is kept too: when no later execution ran (the key was only probed after a
    // store loss), it is the action's one result and duplicates are answered with it
    expiresAt: new Date(atMs + call.ttlMs),
    error: late
      ? `completion refused: the reservation was released or taken over while ${call.runner === "caller" ? "the caller ran its side effect" : "the tool ran"}`
      : verdict === null
        ? null
        : `${COMPLETION_NOT_STORED}: ${verdict.notStored}`,
  };
}

/** Step 4 of a call the gateway ran: its key is told how it ended, then finish; answers its caller. */
export async function settle(core: EngineCore, call: CallContext, token: number, ended: Ended): Promise<InvokeResult> {
  switch (ended.class) {
    case "abandoned":
      await finish(core, call, ended);
      throw new CallAbandonedError();
    case "not_run":
      await core.store.abandon(call.scope, call.key, token).catch(() => {});
      await finish(core, call, ended);
      throw new ToolFailedError(ended.message, ended.upstreamStatus, call.executionId);
    case "unknown": {
      const t = performance.now();
      const marked = await core.store.markUnknown(call.scope, call.key, token, ended.note, core.now()).catch(() => null);
      call.trace.storeMs += performance.now() - t;
      // Not marked: the key was released or taken over meanwhile (recorded as such), or the
      // store is down (the reservation stays inflight and turns stuck: still held).
      await finish(core, call, ended, marked === null || marked.ok ? null : "refused");
      throw new OutcomeUnknownError(call.key, call.executionId, ended.publicNote, ended.timedOut, call.tool.dedupes);
    }
    case "done": {
      const stored = await withinScopeLimit(core, call.scope, ended.stored, call.ttlMs, ended.atMs);
      const t = performance.now();
      const verdict = await storeResult(core, call, token, stored, ended.atMs);
      call.trace.storeMs += performance.now() - t;
      await finish(core, call, { ...ended, stored }, verdict);
      // the caller gets its result even when only a placeholder of it was stored
      const { status, body } = ended.stored;
      return { kind: "executed", status, body, key: call.key, executionId: call.executionId, fallback: call.fallback, lateCompletion: verdict === "refused" };
    }
  }
}

/**
 * The result to store: over its scope's limit on stored bytes, a placeholder (the call is done all
 * the same). A count that cannot be read or written keeps the result: it is not worth losing one.
 */
export async function withinScopeLimit(core: EngineCore, scope: string, stored: StoredResult, ttlMs: number, nowMs: number): Promise<StoredResult> {
  if (!core.scopeResultLimit) return stored;
  return core.scopeResultLimit.admit(scope, stored, ttlMs, nowMs).catch(() => stored);
}

/**
 * A gateway-run call's result stored under its key. The side effect happened, so a store that
 * fails or lost the reservation never fails the call: the caller still gets its result, and the
 * log says it was not stored (the reconciler sees a lost completion).
 */
async function storeResult(core: EngineCore, call: CallContext, token: number, stored: StoredResult, completedMs: number): Promise<KeyVerdict> {
  try {
    const done = await core.store.complete(call.scope, call.key, token, stored, call.ttlMs, completedMs);
    if (done.ok) {
      core.replayCache?.remember(done.record, completedMs);
      return null;
    }
    if (done.reason === "stale_token") return "refused";
    // The reservation is gone: an operator released it while the tool ran (the log turns this
    // outcome into a late completion), or the key store lost it with its data. The side effect
    // happened, so the result goes back under the key unless another call holds it by now.
    if (await restore(core, call, stored, completedMs)) return null;
    return { notStored: "the reservation was released, or lost by the key store, while the tool ran" };
  } catch (err) {
    return { notStored: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * Stores a result whose reservation vanished while the tool ran, if the key is still free: a
 * new reservation completed at once under this execution. Whatever holds the key now wins.
 */
async function restore(core: EngineCore, call: CallContext, stored: StoredResult, completedMs: number): Promise<boolean> {
  const again = await core.store.begin(beginInput(call, completedMs));
  if (again.kind !== "reserved") return false;
  const done = await core.store.complete(call.scope, call.key, again.token, stored, call.ttlMs, completedMs, { executionId: call.executionId });
  if (done.ok) core.replayCache?.remember(done.record, completedMs);
  return done.ok;
}
