/**
 * Steps 1 and 2 of the write order: the key reserved in the key store, then the execution's intent
 * written to the audit log; a duplicate answered by the record in the way, or held while it runs.
 */
import type { KeyRecord } from "../record";
import type { BeginOutcome } from "../key-store";
import { isIdemgateError, LeasePassedError, UnavailableError } from "../errors";
import { answerWhilePaused, pauseOf } from "../paused-tools";
import { leaseMarginMs } from "../tool";
import { beginInput, intentArguments, type CallContext } from "./call";
import type { EngineCore } from "./core";
import { recoverLost } from "./recover";
import { finish } from "./settle";
import { suppressed } from "./suppress";
import type { InvokeResult } from "./types";
import { reserveWindow, settleWindow } from "./window";

/** The longest `Prefer: wait` honoured (RFC 7240 leaves the bound to the server). */
export const MAX_WAIT_MS = 60_000;

/** A waiting duplicate re-reads its key at least this often, in case a change notice was lost. */
const FALLBACK_POLL_MS = 1_000;

/**
 * Steps 1 and 2 for one call, waiting out a running call with this key when `Prefer: wait` asks
 * to: the reservation's token, or the answer when nothing may run.
 */
export async function reserve(core: EngineCore, call: CallContext, waitMs: number | undefined): Promise<{ token: number } | InvokeResult> {
  const waitUntil = waitMs ? performance.now() + Math.min(waitMs, MAX_WAIT_MS) : null;
  let holdsWaitSlot = false;
  try {
    for (;;) {
      const reservation = await reserveKey(core, call, waitUntil !== null);
      if (!("running" in reservation)) return reservation;
      // Prefer: wait — hold the duplicate until the running call ends, then answer it as a retry
      // arriving then would be answered (the result, or the unknown/stuck answer).
      if (performance.now() >= waitUntil!) return suppressed(core, "conflict", reservation.running, call);
      if (!holdsWaitSlot) {
        core.waiting.take(call.scope);
        holdsWaitSlot = true;
      }
      await waitForRunning(core, call, reservation.running, waitUntil!);
    }
  } finally {
    if (holdsWaitSlot) core.waiting.give(call.scope);
  }
}

/**
 * Until the running call's record changes (the store wakes us), its lease ends (a crashed holder
 * sends nothing), FALLBACK_POLL_MS passes (a notice may be lost) or the wait is over.
 */
async function waitForRunning(core: EngineCore, call: CallContext, running: KeyRecord, waitUntil: number): Promise<void> {
  const untilLeaseEnds = (running.leaseUntilMs ?? Infinity) - core.now() + 1;
  await core.store.waitForChange(call.scope, call.key, Math.max(1, Math.min(waitUntil - performance.now(), FALLBACK_POLL_MS, untilLeaseEnds)));
  call.arrivedMs = core.now();
}

/**
 * Steps 1 and 2 of the write order: reserve the key (or answer the record in the way) and write
 * the execution's intent. Returns the reservation's token, the running call a waiting duplicate
 * waits out, or the answer when nothing may run.
 */
async function reserveKey(core: EngineCore, call: CallContext, mayWait: boolean): Promise<{ token: number } | { running: KeyRecord } | InvokeResult> {
  const { tool, trace } = call;
  // a paused tool's call gets the answer its key has already, read without reserving; one that
  // would run is refused (tool_paused) — checked at every attempt, a waiting duplicate's too
  const pause = pauseOf(tool, core.pausedTools);
  if (pause) {
    const held = await answerWhilePaused(core.store, call, pause);
    return held.kind === "conflict" && mayWait ? { running: held.record } : suppressed(core, held.kind, held.record, call);
  }
  const t0 = performance.now();
  if (core.replayReads === "always" || (core.replayReads === "adaptive" && core.duplicateRate.mostlyDuplicates(tool.name))) {
    // a failed read is no answer: begin below decides, and reports the store if it is down
    const done = await core.store.peekReplay!(call.scope, call.key, call.fingerprint, call.arrivedMs).catch(() => null);
    if (done) {
      core.duplicateRate.observe(tool.name, true);
      trace.storeMs += performance.now() - t0;
      return suppressed(core, "replay", done, call);
    }
  }
  let begun: BeginOutcome;
  try {
    // a service that deduplicates on the forwarded key cannot apply a resend twice
    begun = await core.store.begin(beginInput(call, call.arrivedMs, tool.stuckPolicy === "takeover" || tool.dedupes, tool.dedupes));
  } catch (err) {
    trace.storeMs += performance.now() - t0;
    trace.result = "unavailable";
    throw new UnavailableError("key_store", err);
  }
  trace.storeMs += performance.now() - t0;
  core.duplicateRate.observe(tool.name, begun.kind === "replay");
  if (begun.kind === "conflict" && mayWait) return { running: begun.record };
  if (begun.kind !== "reserved") return suppressed(core, begun.kind, begun.record, call);

  const token = begun.token;
  if (begun.takenOver === null && begun.storeEpochMs !== null) {
    // This part of the key store holds data only since its epoch: a result recorded before may
    // have been lost with it. The audit log still knows; answer from it rather than run again.
    const recovered = await recoverLost(core, call, token, begun.storeEpochMs);
    if (recovered) return recovered;
  }
  if (begun.takenOver?.executionId) {
    // the earlier call is over as far as the log is concerned: its key now belongs to this one
    const resent = begun.takenOver.status === "unknown" || tool.dedupes;
    await core.audit
      .closeOpenExecution(
        begun.takenOver.executionId,
        resent ? "retried" : "released",
        resent ? "its outcome was unknown; the service deduplicates on the forwarded key" : "taken over after its lease passed (stuck policy takeover)",
      )
      .catch(() => false);
  }
  if (call.window) {
    const answered = await reserveWindow(core, call, token);
    if (answered) return answered;
  }
  return writeIntent(core, call, token, begun.record);
}

/**
 * Step 2: the execution's intent, written before anything runs (no intent, no side effect), and
 * only while enough of the lease is left for the call to finish within it.
 */
async function writeIntent(core: EngineCore, call: CallContext, token: number, record: KeyRecord): Promise<{ token: number } | InvokeResult> {
  const { tool, trace } = call;
  const t1 = performance.now();
  try {
    await core.audit.intent(
      {
        id: call.executionId,
        scope: call.scope,
        key: call.key,
        tool: tool.name,
        fingerprint: call.fingerprint,
        token,
        session: call.session,
        caller: call.caller,
        transport: call.transport,
        fallback: call.fallback,
        startedAt: new Date(call.arrivedMs),
        leaseUntil: new Date(call.arrivedMs + tool.leaseMs),
        ...intentArguments(call.arguments),
      },
      call.runner === "caller" ? DURABLE : undefined,
    );
  } catch (err) {
    trace.auditMs += performance.now() - t1;
    // No intent, no side effect: give the key back so a retry can run once the log is back.
    await core.store.abandon(call.scope, call.key, token).catch(() => {});
    await settleWindow(core, call, { class: "not_run" });
    // The store lost the reservation of a call that is still running; the log caught it.
    if (isIdemgateError(err, "open_execution")) return suppressed(core, "conflict", record, call);
    trace.result = "unavailable";
    throw new UnavailableError("audit_log", err);
  }
  trace.auditMs += performance.now() - t1;
  const leaseUntilMs = call.arrivedMs + tool.leaseMs;
  if (core.now() + (tool.runTimeoutMs ?? 0) >= leaseUntilMs - leaseMarginMs(tool.leaseMs)) {
    // The intent took so much of the lease that the call could outlive it: from its end another
    // caller may take the key over (stuck policy takeover, a service that deduplicates) and run it
    // too. Do not run: the intent ends as not run, the key is given back, the caller retries
    // with the same key.
    await core.store.abandon(call.scope, call.key, token).catch(() => {});
    await finish(core, call, { class: "not_run", message: "not run: its intent was written too late in its lease for the call to finish within it", durationMs: 0 });
    // the caller is answered 503: nothing ran, and the same key may be sent again
    trace.result = "unavailable";
    throw new LeasePassedError(leaseUntilMs);
  }
  return { token };
}

const DURABLE = { durable: true } as const;
