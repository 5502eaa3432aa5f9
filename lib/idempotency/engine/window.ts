import { UnavailableError } from "../errors";
import type { BeginOutcome } from "../key-store";
import type { StoredResult } from "../record";
import { beginInput, type CallContext } from "./call";
import type { EngineCore } from "./core";
import { suppressed } from "./suppress";
import type { InvokeResult } from "./types";

/**
 * An advisory key's second check: the (tool, arguments) window, under the fallback key of the
 * call's fingerprint. An identical call under another fresh key within the window is this call's
 * duplicate: its own key then becomes an alias of that call's result (or is given back while that
 * call runs or is held), and nothing runs. Returns the answer, or null when this call may run.
 */
export async function reserveWindow(core: EngineCore, call: CallContext, token: number): Promise<InvokeResult | null> {
  const window = call.window!;
  let begun: BeginOutcome;
  const t = performance.now();
  try {
    begun = await core.store.begin({ ...beginInput(call, call.arrivedMs), key: window.key, fallback: true });
  } catch (err) {
    await core.store.abandon(call.scope, call.key, token).catch(() => {});
    call.trace.storeMs += performance.now() - t;
    call.trace.result = "unavailable";
    throw new UnavailableError("key_store", err);
  }
  call.trace.storeMs += performance.now() - t;
  if (begun.kind === "reserved") {
    window.token = begun.token;
    return null;
  }
  const first = begun.record;
  if (begun.kind === "replay" && first.result) {
    // the call's own key answers like the first call from now on
    const aliased = await core.store
      .complete(call.scope, call.key, token, first.result, call.ttlMs, call.arrivedMs, { executionId: first.executionId ?? undefined })
      .catch(() => null);
    if (!aliased?.ok) await core.store.abandon(call.scope, call.key, token).catch(() => {});
    return suppressed(core, "fresh_key", first, call);
  }
  await core.store.abandon(call.scope, call.key, token).catch(() => {});
  return suppressed(core, begun.kind === "replay" ? "conflict" : begun.kind, first, { ...call, fallback: true });
}

/** How a call ended, as far as its window reservation is concerned. */
export type WindowEnd = { class: "done"; stored: StoredResult } | { class: "not_run" } | { class: "unknown"; note: string };

/** Gives an advisory call's window reservation the outcome of its own key. */
export async function settleWindow(core: EngineCore, call: CallContext, ended: WindowEnd): Promise<void> {
  const window = call.window;
  if (!window || window.token === null) return;
  const { key, token, ttlMs } = window;
  const now = core.now();
  const settled =
    ended.class === "done"
      ? core.store.complete(call.scope, key, token, ended.stored, ttlMs, now)
      : ended.class === "not_run"
        ? core.store.abandon(call.scope, key, token)
        : core.store.markUnknown(call.scope, key, token, ended.note, now);
  // a window reservation that cannot be settled turns stuck after its lease: still held
  await settled.catch(() => {});
}
