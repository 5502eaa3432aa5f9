import type { AuditWriter } from "./audit-port";
import type { KeyStore } from "./key-store";
import type { PausedTools } from "./paused-tools";
import type { KeyRecord, StoredResult } from "./record";
import type { RunTool, ToolPolicy } from "./tool";
import { admit } from "./engine/admit";
import { CallTrace } from "./engine/call";
import { completeHeld, heartbeatHeld, hold, releaseHeld } from "./engine/client-run";
import { engineCore, type EngineCore } from "./engine/core";
import { release, resolve } from "./engine/decisions";
import { execute } from "./engine/execute";
import { read } from "./engine/pass-through";
import { restoreFromLog, retryRestores } from "./engine/recover";
import { settle } from "./engine/settle";
import { recordClientReplays } from "./engine/suppress";
import type { ClientReplay, EngineOptions, InvokeRequest, InvokeResult, OperatorDecision, ReserveResult, SettleResult, SettleTarget } from "./engine/types";

export type {
  CallEvent,
  ClientReplay,
  EngineOptions,
  InvokeRequest,
  InvokeResult,
  KeySource,
  OperatorDecision,
  ReserveResult,
  SettleResult,
  SettleTarget,
} from "./engine/types";
export type { Transport } from "./audit-port";
export { MAX_RESERVATION_MS } from "./engine/client-run";
export { MAX_KEPT_ANSWER_BYTES } from "./engine/execute";
export { MAX_WAIT_MS } from "./engine/reserve";

/**
 * Runs tool calls exactly once per (scope, key): reserve, record the intent, run, complete, record
 * the outcome — in that order, failing closed when the key store or the audit log cannot be written.
 *
 * The phases live in ./engine/, one file each, in the order a call meets them: admit (the call's
 * context, then reserve: the key and the intent, waiting out a running call, the advisory window,
 * recovery from the audit log after a key-store loss), execute, settle (a gateway-run call) or
 * client-run (a call run in its caller's process), both ending in settle's `finish`; beside them
 * operator decisions, pass-through reads and client-reported replays. Every call's figures are
 * reported once, when the method that took it returns or throws.
 */
export class Engine {
  readonly store: KeyStore;
  readonly audit: AuditWriter;
  readonly pausedTools: PausedTools | null;
  private readonly core: EngineCore;

  constructor(options: EngineOptions) {
    this.core = engineCore(options);
    this.store = options.store;
    this.audit = options.audit;
    this.pausedTools = this.core.pausedTools;
  }

  /** A tool call through the gateway: a write admitted, run and settled here; a read run as it comes. */
  async invoke(tool: ToolPolicy, run: RunTool, request: InvokeRequest): Promise<InvokeResult> {
    const trace = new CallTrace(tool.name, this.core.onCall);
    try {
      if (tool.kind === "read") return await read(this.core, tool, run, request, trace);
      const admitted = await admit(this.core, tool, request, trace, "gateway");
      if (!("call" in admitted)) return admitted;
      return await settle(this.core, admitted.call, admitted.token, await execute(this.core, admitted.call, run, request.args));
    } finally {
      trace.end();
    }
  }

  /**
   * The reservation phase on its own, for a tool that runs in its caller's process: steps 1 and 2
   * of the write order exactly as invoke takes them (the replay cache, the advisory key's arguments
   * window, fallback dedupe, `Prefer: wait`, the recovery after a key-store loss), the intent
   * written to the database in every audit mode before this resolves. Returns the reservation
   * (the caller now runs the side effect, then settles it: completeExecution, releaseExecution;
   * heartbeatExecution while it runs) or the stored result of a replay; throws the suppressions'
   * errors as invoke does.
   */
  async reserve(tool: ToolPolicy, request: InvokeRequest): Promise<ReserveResult> {
    if (tool.kind !== "write") throw new Error(`${tool.name} is a read: reads are never reserved`);
    const trace = new CallTrace(tool.name, this.core.onCall);
    try {
      const admitted = await admit(this.core, tool, request, trace, "caller");
      if (!("call" in admitted)) return admitted as Extract<InvokeResult, { kind: "replayed" }>;
      return hold(this.core, admitted.call, admitted.token);
    } finally {
      trace.end();
    }
  }

  /** Calls waiting out a running call with their key (`Prefer: wait`) now: in all, or of one scope. */
  waitingCalls(scope?: string): number {
    return this.core.waiting.count(scope);
  }

  /**
   * A client-run call's result: stored under the key and replayed to every duplicate; a status of
   * 400 or more is a final error, stored the same way. Sent again with the same result, answered as
   * the first time; with another, refused (invalid_state). When the key was released or taken over
   * meanwhile, refused (stale_token) and kept in the audit log as a late completion.
   */
  completeExecution(target: SettleTarget, result: { status: number; body: unknown }): Promise<SettleResult> {
    return completeHeld(this.core, target, result);
  }

  /**
   * A client-run call ended without a result: `not_run` (the key is freed and a retry runs) or
   * `unknown` (the key is held until a probe or an operator decides).
   */
  releaseExecution(target: SettleTarget, outcome: "not_run" | "unknown", note: string | null): Promise<SettleResult> {
    return releaseHeld(this.core, target, outcome, note);
  }

  /** A client-run call is still running: its lease is extended (up to MAX_RESERVATION_MS after it was reserved). */
  heartbeatExecution(target: SettleTarget): Promise<SettleResult> {
    return heartbeatHeld(this.core, target);
  }

  /**
   * Whether a retry of an execution's call (the same arguments), arriving at `nowMs` while the key
   * store has no record under its key, gets the execution's result back from the audit log instead
   * of running (the reconciler's question about lost completions).
   */
  retryRestores(scope: string, key: string, executionId: string, nowMs: number = this.core.now()): Promise<boolean> {
    return retryRestores(this.core, scope, key, executionId, nowMs);
  }

  /**
   * After a key-store loss, what a retry does for a call the audit log holds open while the store
   * has no record under its key, done without a retry: the key is held as unknown for that
   * execution. Returns the key's record now, or null when the log holds no such call for the key.
   */
  async restoreHeld(scope: string, key: string, nowMs: number = this.core.now()): Promise<KeyRecord | null> {
    return (await restoreFromLog(this.core, scope, key, nowMs))?.record ?? null;
  }

  /** Replays a client answered from its own cache, written to the audit log as the suppressions they were. */
  recordClientReplays(scope: string, caller: string | null, items: readonly ClientReplay[]): Promise<{ recorded: number; ignored: number }> {
    return recordClientReplays(this.core, scope, caller, items);
  }

  /** The operator (or the tool's probe) says the side effect did not happen: the next call with the key runs it. */
  release(decision: OperatorDecision, restored = false): Promise<{ before: KeyRecord }> {
    return release(this.core, decision, restored);
  }

  /** The operator (or the tool's probe) confirmed the side effect happened: the key is done with the result they supply. */
  resolve(decision: OperatorDecision & { result: unknown; status?: number; ttlMs: number }, restored = false): Promise<{ before: KeyRecord; after: KeyRecord | null }> {
    return resolve(this.core, decision, restored);
  }

  /**
   * A decision the key store carries already while the audit log still holds its call open (the
   * process that decided stopped in between): the execution is closed in the log as decided, so a
   * key-store loss restores the decision rather than the held call. Only an open or unknown
   * execution is changed; returns whether it was.
   */
  recordDecided(executionId: string, outcome: "released" | "resolved", reason: string, result?: StoredResult & { expiresAt: Date }): Promise<boolean> {
    return this.core.audit.closeOpenExecution(executionId, outcome, reason, result);
  }
}
