import type { Transport } from "../audit-port";
import type { BeginInput } from "../key-store";
import type { KeptArguments } from "../kept-arguments";
import type { StoredResult } from "../record";
import type { ToolPolicy } from "../tool";
import type { CallEvent } from "./types";

/** One write call as it passes the engine's phases, from its admission to its end. */
export interface CallContext {
  tool: ToolPolicy;
  scope: string;
  key: string;
  fingerprint: string;
  /** how long a result is replayed: the tool's TTL, or its fallback window for a fallback key */
  ttlMs: number;
  executionId: string;
  fallback: boolean;
  session: string | null;
  caller: string | null;
  transport: Transport;
  arrivedMs: number;
  /**
   * who runs the side effect: the gateway (invoke), or the caller in its own process (a
   * reservation handed to it, settled later; its intent goes to the database in every audit mode)
   */
  runner: "gateway" | "caller";
  trace: CallTrace;
  /** the arguments its execution keeps for operators (null: the tool keeps none, or a reservation read back from the log) */
  arguments?: KeptArguments | null;
  /** an advisory key's (tool, arguments) window: its fallback key, how long, and its reservation once held */
  window: { key: string; ttlMs: number; token: number | null } | null;
  /** a reservation handed to its caller: its token */
  token?: number;
}

/** How a call ended, sorted into the outcome classes (DESIGN.md): as its tool ran, or in its caller's word. */
export type Ended =
  /** atMs: when the result was completed */
  | { class: "done"; stored: StoredResult; atMs: number; durationMs: number }
  | { class: "not_run"; message: string; upstreamStatus?: number; durationMs: number }
  /** note: for operators; publicNote: what the caller is told */
  | { class: "unknown"; note: string; publicNote: string; timedOut: boolean; durationMs: number; answer?: { status: number; body: string } | null }
  /** the handler abandoned the call as a crashed process would: nothing is written */
  | { class: "abandoned" };

/**
 * What the key store said to a call's ending, as the log records it: nothing against it (null);
 * `refused`, the key having been released or taken over meanwhile (a result is then a late
 * completion); or, for a result it could not store, why.
 */
export type KeyVerdict = null | "refused" | { notStored: string };

/**
 * What one call reports when it is over (CallEvent: metrics): its result once it has one, and the
 * time it spent in the key store and the audit log. The operation that took the call ends it once,
 * in a `finally`; a call that ended without a result (a reservation handed to its caller, which
 * reports at its settle, or an exception no outcome class names) reports nothing then.
 */
export class CallTrace {
  result: CallEvent["result"] | null = null;
  storeMs = 0;
  auditMs = 0;
  /** answered from the engine's replay cache, without the key store */
  cached = false;

  constructor(
    readonly tool: string,
    private readonly onCall: (event: CallEvent) => void,
  ) {}

  end(): void {
    const result = this.result;
    if (result === null) return;
    this.result = null;
    this.onCall({ tool: this.tool, result, storeMs: this.storeMs, auditMs: this.auditMs, cached: this.cached });
  }
}

/** The key store's begin for this call at `nowMs`; a stuck or unknown record is taken over only when asked. */
export function beginInput(call: CallContext, nowMs: number, takeoverStuck = false, retryUnknown = false): BeginInput {
  return {
    scope: call.scope,
    key: call.key,
    tool: call.tool.name,
    fingerprint: call.fingerprint,
    leaseMs: call.tool.leaseMs,
    nowMs,
    fallback: call.fallback,
    session: call.session,
    executionId: call.executionId,
    takeoverStuck,
    retryUnknown,
  };
}

export function serialize(body: unknown): string {
  return JSON.stringify(body ?? null);
}

export function intentArguments(kept: KeptArguments | null | undefined): { arguments: string | null; argumentsKept: KeptArguments["kept"] | null } {
  return kept ? { arguments: kept.json, argumentsKept: kept.kept } : { arguments: null, argumentsKept: null };
}
