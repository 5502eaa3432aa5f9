/**
 * Calls run in their caller's process (a tool declared `runs: client`): the reservation handed to
 * the caller, then its settle (complete, release) through finish, and its heartbeats meanwhile.
 */
import type { ExecutionRow } from "../audit-port";
import { ExecutionNotFoundError, InvalidStateError, StaleTokenError } from "../errors";
import { canonicalJson } from "../fingerprint";
import { fallbackKey, isPassThroughKey } from "../key-rules";
import type { CompleteOutcome } from "../key-store";
import type { KeyRecord, StoredResult } from "../record";
import { isOverLimitResult } from "../scope-result-limit";
import { DEFAULT_POLICY } from "../tool";
import { CallTrace, serialize, type CallContext, type Ended } from "./call";
import { logCall, storeCall, type EngineCore } from "./core";
import { completeHeldAgain, markHeldAgain, releaseHeldAgain } from "./held-again";
import { finish, withinScopeLimit } from "./settle";
import type { ReserveResult, SettleResult, SettleTarget } from "./types";

/** The longest a reservation may be held by heartbeats, from when it was made. */
export const MAX_RESERVATION_MS = 24 * 60 * 60 * 1000;

/** A reservation handed to the caller that runs the side effect: remembered until it is settled. */
export function hold(core: EngineCore, call: CallContext, token: number): ReserveResult {
  call.token = token;
  core.held.remember(call);
  return { kind: "reserved", key: call.key, executionId: call.executionId, token, leaseUntilMs: call.arrivedMs + call.tool.leaseMs, fallback: call.fallback };
}

/**
 * A client-run call's result (step 4, then finish): stored under the key and replayed to every
 * duplicate; a status of 400 or more is a final error, stored the same way. Sent again with the
 * same result, answered as the first time; with another, refused (invalid_state). When the key
 * was released or taken over meanwhile, refused (stale_token) and kept in the audit log as a late
 * completion, which the reconciler flags.
 */
export async function completeHeld(core: EngineCore, target: SettleTarget, result: { status: number; body: unknown }): Promise<SettleResult> {
  const call = await heldCall(core, target);
  try {
    const offered: StoredResult = { status: result.status, body: serialize(result.body), final: result.status >= 400 };
    const completedMs = core.now();
    const stored = await withinScopeLimit(core, call.scope, offered, call.ttlMs, completedMs);
    const t = performance.now();
    let done: CompleteOutcome = await storeCall(() => core.store.complete(call.scope, call.key, target.token, stored, call.ttlMs, completedMs));
    if (!done.ok) done = (await completeHeldAgain(core, call, stored, completedMs, done.current)) ?? done;
    call.trace.storeMs += performance.now() - t;
    const ended: Ended = { class: "done", stored, atMs: completedMs, durationMs: Math.max(0, completedMs - call.arrivedMs) };
    if (done.ok) {
      core.replayCache?.remember(done.record, completedMs);
      await finish(core, call, ended);
      return { state: "done", status: stored.status, body: stored.body, replayed: false, expiresAtMs: done.record.expiresAtMs, executionId: call.executionId };
    }
    const current = done.current;
    if (current && current.executionId === call.executionId && current.status === "done" && current.result) {
      // this execution's result is stored (under this reservation, or under the one that held the
      // key again for it after a key-store loss): the same result sent again is answered as the first time
      // (a result stored as its scope's over-limit placeholder cannot be compared: the resend is answered with it)
      if (current.result.status === stored.status && (sameJson(current.result.body, offered.body) || isOverLimitResult(current.result.body))) {
        core.held.forget(call.executionId);
        return { state: "done", status: current.result.status, body: current.result.body, replayed: true, expiresAtMs: current.expiresAtMs, executionId: call.executionId };
      }
    }
    if (current && current.executionId === call.executionId && current.token === target.token) {
      core.held.forget(call.executionId);
      if (current.status === "done") throw new InvalidStateError("this execution was completed with another result; a stored result is never changed", current);
      throw new InvalidStateError(
        "this execution was reported as unknown: the key is held until the tool's status probe or an operator decides (resolve it with this result in the console)",
        current,
      );
    }
    // Released by an operator or taken over while the caller ran its side effect: the key is no
    // longer this reservation's. The result is kept in the log (a late completion, flagged).
    await finish(core, call, ended, "refused");
    throw new StaleTokenError(
      call.executionId,
      "the key was released or taken over while this reservation's side effect ran; the result was not stored under the key but kept in the audit log as a late completion, which operators see flagged",
    );
  } finally {
    call.trace.end();
  }
}

/**
 * A client-run call ended without a result (step 4, then finish): `not_run` is the caller's word
 * that its side effect did not happen (the key is freed and a retry runs); `unknown` that it
 * cannot tell (the key is held as unknown until a probe or an operator decides). The same release
 * sent again is answered as the first time.
 */
export async function releaseHeld(core: EngineCore, target: SettleTarget, outcome: "not_run" | "unknown", note: string | null): Promise<SettleResult> {
  const call = await heldCall(core, target);
  try {
    const durationMs = Math.max(0, core.now() - call.arrivedMs);
    if (outcome === "not_run") {
      const message = note ? `not run: ${note}` : "not run: the caller said its side effect did not happen";
      if (!(await storeCall(() => core.store.abandon(call.scope, call.key, target.token)))) {
        // Not freed: settled already, released meanwhile, or released by this same call sent before.
        // Which one only the store and the log can say; a read that fails is no answer (503, retry).
        const current = await storeCall(() => core.store.get(call.scope, call.key));
        if (current && current.executionId === call.executionId && current.token === target.token) throw settledAlready(current);
        if (!(await releaseHeldAgain(core, call, current))) {
          const row = await logCall(() => core.audit.execution(call.executionId));
          if (row?.outcome === "failed") return { state: "released" };
          throw new StaleTokenError(call.executionId, "the key was released or taken over meanwhile; nothing was changed");
        }
      }
      await finish(core, call, { class: "not_run", message, durationMs });
      return { state: "released" };
    }
    const noteText = note ?? "the caller could not tell whether its side effect happened";
    const marked = await storeCall(() => core.store.markUnknown(call.scope, call.key, target.token, noteText, core.now()));
    if (!marked.ok) {
      const current = marked.current;
      if (current && current.executionId === call.executionId && current.token === target.token) {
        if (current.status === "unknown") return { state: "unknown" };
        throw settledAlready(current);
      }
      if (!(await markHeldAgain(core, call, current, noteText))) {
        throw new StaleTokenError(call.executionId, "the key was released or taken over meanwhile; nothing was changed");
      }
    }
    await finish(core, call, { class: "unknown", note: noteText, publicNote: noteText, timedOut: false, durationMs });
    return { state: "unknown" };
  } finally {
    call.trace.end();
  }
}

/**
 * A client-run call is still running: its lease is extended by the tool's lease from now, up to
 * MAX_RESERVATION_MS after it was reserved (beyond, refused: complete or release it). Refused
 * (stale_token) once the key was released or taken over: the caller should stop and say so.
 */
export async function heartbeatHeld(core: EngineCore, target: SettleTarget): Promise<SettleResult> {
  const call = await heldCall(core, target);
  const now = core.now();
  const cap = call.arrivedMs + MAX_RESERVATION_MS;
  if (now >= cap) {
    throw new InvalidStateError(`a reservation is held at most ${MAX_RESERVATION_MS / 3_600_000} h; this one was made at ${new Date(call.arrivedMs).toISOString()}: complete or release it`, null);
  }
  const leaseUntilMs = Math.min(now + call.tool.leaseMs, cap);
  const out = await storeCall(() => core.store.extendLease(call.scope, call.key, target.token, leaseUntilMs));
  if (!out.ok) {
    const current = out.current;
    if (current && current.executionId === call.executionId && current.token === target.token) throw settledAlready(current);
    throw new StaleTokenError(call.executionId, "the key was released or taken over; stop the heartbeats (a result is kept only as a late completion)");
  }
  const window = call.window;
  // the window's lease goes with its key's: left behind, it turns stuck while its call still runs
  if (window?.token != null) await storeCall(() => core.store.extendLease(call.scope, window.key, window.token!, leaseUntilMs));
  // the log's orphan checks wait for the new lease too
  await logCall(() => core.audit.extendLease(call.executionId, new Date(leaseUntilMs)));
  return { state: "reserved", leaseUntilMs };
}

/**
 * The reservation a settle is about, with its token checked: from this process's memory, or
 * rebuilt from the audit log's intent (reserved through another process). An execution of another
 * scope, of a tool that does not run in its caller's process, or none at all, is the same 404.
 */
async function heldCall(core: EngineCore, target: SettleTarget): Promise<CallContext> {
  let call = core.held.get(target.executionId);
  if (call && call.scope !== target.scope) throw new ExecutionNotFoundError();
  if (!call) {
    const row: ExecutionRow | null = await logCall(() => core.audit.execution(target.executionId));
    const tool = row ? target.policyOf(row.tool) : undefined;
    if (!row || row.scope !== target.scope || !tool || tool.runs !== "client" || isPassThroughKey(row.key)) throw new ExecutionNotFoundError();
    const windowKey = fallbackKey(row.fingerprint);
    const windowTtlMs = tool.fallbackTtlMs ?? DEFAULT_POLICY.fallbackDefaultTtlMs;
    // An advisory key's window reservation carries this execution's id: settled with it. A read
    // that fails is no answer: taken for "no window", the window would stay inflight and turn
    // stuck, blocking every identical call under a fresh key. Refused instead (503), nothing changed.
    const window = row.fallback ? null : await storeCall(() => core.store.get(target.scope, windowKey));
    call = {
      tool,
      scope: row.scope,
      key: row.key,
      fingerprint: row.fingerprint,
      ttlMs: row.fallback ? (tool.fallbackTtlMs ?? DEFAULT_POLICY.fallbackDefaultTtlMs) : tool.ttlMs,
      executionId: row.id,
      fallback: row.fallback,
      session: row.session,
      caller: null,
      transport: "http",
      arrivedMs: row.startedAt.getTime(),
      runner: "caller",
      trace: new CallTrace(tool.name, core.onCall),
      window: window && window.executionId === row.id && window.status === "inflight" ? { key: windowKey, ttlMs: windowTtlMs, token: window.token } : null,
      token: row.token,
    };
  }
  if (call.token !== target.token) throw new StaleTokenError(target.executionId, "this is not the token of the reservation; nothing was changed");
  return call;
}

function settledAlready(current: KeyRecord): InvalidStateError {
  return new InvalidStateError(
    current.status === "done"
      ? "this execution was completed already; its result is stored and replayed"
      : "this execution was reported as unknown: the key is held until the tool's status probe or an operator decides",
    current,
  );
}

/**
 * Whether two stored bodies (JSON texts) are the same JSON: a completion sent again by a client
 * that serialises its keys in another order is the same result.
 */
function sameJson(a: string, b: string): boolean {
  if (a === b) return true;
  try {
    return canonicalJson(JSON.parse(a)) === canonicalJson(JSON.parse(b));
  } catch {
    return false;
  }
}
