import { randomUUID } from "node:crypto";
import { MissingKeyError } from "../errors";
import { canonicalJson, fingerprintOfJson } from "../fingerprint";
import { keptArguments } from "../kept-arguments";
import { fallbackKey, validateKey } from "../key-rules";
import { DEFAULT_POLICY, type ToolPolicy } from "../tool";
import type { CallContext, CallTrace } from "./call";
import type { EngineCore } from "./core";
import { reserve } from "./reserve";
import { suppressed } from "./suppress";
import type { InvokeRequest, InvokeResult } from "./types";

/** An admitted write: its context and the reservation's token (the side effect may run now). */
export interface Admitted {
  call: CallContext;
  token: number;
}

/**
 * Steps 1 and 2 for a write, run by the gateway or by its caller: the call's context, then a
 * duplicate of a done key this process remembers answered from memory, then the key reserved and
 * the intent written (waiting out a running call with the key when `Prefer: wait` asks to).
 * Returns the reservation, or the answer when nothing may run.
 */
export async function admit(core: EngineCore, tool: ToolPolicy, request: InvokeRequest, trace: CallTrace, runner: CallContext["runner"]): Promise<Admitted | InvokeResult> {
  const call = callContext(core, tool, request, trace, runner);
  const cached = core.replayCache?.get(call.scope, call.key, call.arrivedMs);
  if (cached) {
    trace.cached = true;
    return suppressed(core, cached.fingerprint === call.fingerprint ? "replay" : "mismatch", cached, call);
  }
  // From here on the call may become a first execution: what may refuse one before anything is
  // reserved (a paused tool) is checked at each attempt to reserve (reserve.ts, reserveKey), after
  // the cached replays above, which it must not refuse.
  const reserved = await reserve(core, call, request.waitMs);
  return "token" in reserved ? { call, token: reserved.token } : reserved;
}

/** The call's key (its own, or the fallback key of its arguments) and what the log needs of it. */
function callContext(core: EngineCore, tool: ToolPolicy, request: InvokeRequest, trace: CallTrace, runner: CallContext["runner"]): CallContext {
  // one canonical JSON of the arguments for their fingerprint and the copy the log keeps
  const canonical = canonicalJson(request.args ?? null);
  const fingerprint = fingerprintOfJson(tool.name, canonical);
  let key: string;
  let fallback = false;
  let ttlMs = tool.ttlMs;
  if (request.key === null || request.key === undefined) {
    if (tool.fallbackTtlMs === null) {
      trace.result = "missing_key";
      throw new MissingKeyError(tool.name);
    }
    key = fallbackKey(fingerprint);
    fallback = true;
    ttlMs = tool.fallbackTtlMs;
  } else {
    key = validateKey(request.key);
  }
  const advisory = !fallback && request.keySource === "model";
  return {
    tool,
    scope: request.scope,
    key,
    fingerprint,
    ttlMs,
    fallback,
    session: request.session ?? null,
    caller: request.caller ?? null,
    transport: request.transport ?? "http",
    executionId: randomUUID(),
    arrivedMs: core.now(),
    runner,
    trace,
    arguments: keptArguments(request.args, tool.argumentRetention, request.args === null || request.args === undefined ? undefined : canonical),
    window: advisory ? { key: fallbackKey(fingerprint), ttlMs: tool.fallbackTtlMs ?? DEFAULT_POLICY.fallbackDefaultTtlMs, token: null } : null,
  };
}
