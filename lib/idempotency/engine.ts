import { randomUUID } from "node:crypto";
import type { BeginOutcome, KeyStore } from "@/lib/store/key-store";
import { OpenExecutionError, type AuditWriter, type PriorExecution, type SuppressionKind } from "./audit-port";
import {
  CallAbandonedError,
  ConflictError,
  InvalidStateError,
  isIdemgateError,
  MismatchError,
  MissingKeyError,
  StuckKeyError,
  ToolFailedError,
  UnavailableError,
} from "./errors";
import { fingerprint as fingerprintOf } from "./fingerprint";
import { fallbackKey, validateKey } from "./keys";
import type { KeyRecord, StoredResult } from "./record";
import type { ReplayCache } from "./replay-cache";
import { AbandonCall, isFinalToolError, type RunTool, type ToolPolicy, type ToolResult } from "./tool";

export interface InvokeRequest {
  scope: string;
  /** the caller's Idempotency-Key; null or undefined when none was sent */
  key?: string | null;
  args: unknown;
  session?: string | null;
  /** who called (an API token's id), for the audit log */
  caller?: string | null;
}

export type InvokeResult =
  | { kind: "executed"; status: number; body: string; key: string; executionId: string; fallback: boolean; lateCompletion: boolean }
  | { kind: "replayed"; status: number; body: string; key: string; record: KeyRecord; gapMs: number; fallback: boolean }
  | { kind: "read"; status: number; body: string };

export interface EngineOptions {
  store: KeyStore;
  audit: AuditWriter;
  now?: () => number;
  /** observes each finished call (metrics); must not throw */
  onCall?: (event: CallEvent) => void;
  /** answers duplicates of done keys this process has seen without a store round trip */
  replayCache?: ReplayCache | null;
}

export interface CallEvent {
  tool: string;
  result: "executed" | "replayed" | "read" | SuppressionKind | "missing_key" | "unavailable" | "tool_failed" | "abandoned" | "final_error";
  storeMs: number;
  auditMs: number;
  /** answered from the engine's replay cache, without the key store */
  cached?: boolean;
}

/** An operator's decision about an inflight or stuck key. */
export interface OperatorDecision {
  scope: string;
  key: string;
  actor: string;
  reason: string;
}

function serialize(body: unknown): string {
  return JSON.stringify(body ?? null);
}

/**
 * Runs tool calls exactly once per (scope, key): reserve, record the intent, run, complete, record
 * the outcome — in that order, failing closed when the key store or the audit log cannot be written.
 */
export class Engine {
  readonly store: KeyStore;
  readonly audit: AuditWriter;
  private readonly now: () => number;
  private readonly onCall: (event: CallEvent) => void;
  private readonly replayCache: ReplayCache | null;
  /** per store epoch: until when results from before it may be asked for */
  private readonly recoveryEnds = new Map<number, Promise<number | null>>();

  constructor(options: EngineOptions) {
    this.store = options.store;
    this.audit = options.audit;
    this.now = options.now ?? Date.now;
    this.onCall = options.onCall ?? (() => {});
    this.replayCache = options.replayCache ?? null;
  }

  async invoke(tool: ToolPolicy, run: RunTool, request: InvokeRequest): Promise<InvokeResult> {
    if (tool.kind === "read") {
      const result = await run(request.args, { scope: request.scope, key: null, session: request.session ?? null, executionId: null });
      this.onCall({ tool: tool.name, result: "read", storeMs: 0, auditMs: 0 });
      return { kind: "read", status: result.status ?? 200, body: serialize(result.body) };
    }

    const fp = fingerprintOf(tool.name, request.args);
    let key: string;
    let fallback = false;
    let ttlMs = tool.ttlMs;
    if (request.key === null || request.key === undefined) {
      if (tool.fallbackTtlMs === null) {
        this.onCall({ tool: tool.name, result: "missing_key", storeMs: 0, auditMs: 0 });
        throw new MissingKeyError(tool.name);
      }
      key = fallbackKey(fp);
      fallback = true;
      ttlMs = tool.fallbackTtlMs;
    } else {
      key = validateKey(request.key);
    }

    const session = request.session ?? null;
    const caller = request.caller ?? null;
    const executionId = randomUUID();
    const arrivedMs = this.now();
    let storeMs = 0;
    let auditMs = 0;

    const cached = this.replayCache?.get(request.scope, key, arrivedMs);
    if (cached) {
      const call: CallContext = { tool, scope: request.scope, key, fallback, session, caller, arrivedMs, storeMs, auditMs, cached: true };
      return this.suppressed(cached.fingerprint === fp ? "replay" : "mismatch", cached, call);
    }

    let begun: BeginOutcome;
    const t0 = performance.now();
    try {
      begun = await this.store.begin({
        scope: request.scope,
        key,
        tool: tool.name,
        fingerprint: fp,
        leaseMs: tool.leaseMs,
        nowMs: arrivedMs,
        fallback,
        session,
        executionId,
        takeoverStuck: tool.stuckPolicy === "takeover",
      });
    } catch (err) {
      this.onCall({ tool: tool.name, result: "unavailable", storeMs: performance.now() - t0, auditMs });
      throw new UnavailableError("key_store", err);
    }
    storeMs += performance.now() - t0;

    const call: CallContext = { tool, scope: request.scope, key, fallback, session, caller, arrivedMs, storeMs, auditMs };
    if (begun.kind !== "reserved") return this.suppressed(begun.kind, begun.record, call);

    if (begun.takenOver === null && begun.storeEpochMs !== null && arrivedMs - begun.storeEpochMs < ttlMs && (await this.mayRecover(begun.storeEpochMs, arrivedMs, begun.token, call))) {
      // This part of the key store holds data only since its epoch: a result recorded before may
      // have been lost with it. The audit log still knows; answer from it rather than run again.
      const recovered = await this.recoverFromAudit(call, begun.token, fp, ttlMs);
      if (recovered) return recovered;
    }
    const token = begun.token;
    if (begun.takenOver?.executionId) {
      // the stuck call is over as far as the log is concerned: its key now belongs to this one
      await this.audit.closeOpenExecution(begun.takenOver.executionId, "released", "taken over after its lease passed (stuck policy takeover)").catch(() => false);
    }
    const t1 = performance.now();
    try {
      await this.audit.intent({
        id: executionId,
        scope: request.scope,
        key,
        tool: tool.name,
        fingerprint: fp,
        token,
        session,
        caller,
        fallback,
        startedAt: new Date(arrivedMs),
        leaseUntil: new Date(arrivedMs + tool.leaseMs),
      });
    } catch (err) {
      // No intent, no side effect: give the key back so a retry can run once the log is back.
      await this.store.abandon(request.scope, key, token).catch(() => {});
      if (err instanceof OpenExecutionError || (err as Error)?.name === "OpenExecutionError") {
        // The store lost the reservation of a call that is still running; the log caught it.
        return this.suppressed("conflict", begun.record, { ...call, auditMs: performance.now() - t1 });
      }
      this.onCall({ tool: tool.name, result: "unavailable", storeMs, auditMs: performance.now() - t1 });
      throw new UnavailableError("audit_log", err);
    }
    auditMs += performance.now() - t1;

    const started = performance.now();
    let stored: StoredResult;
    try {
      const result: ToolResult = await run(request.args, { scope: request.scope, key, session, executionId });
      stored = { status: result.status ?? 200, body: serialize(result.body), final: false };
    } catch (err) {
      if (isFinalToolError(err)) {
        stored = { status: err.status, body: serialize(err.body), final: true };
      } else if (err instanceof AbandonCall || (err as Error)?.name === "AbandonCall") {
        this.onCall({ tool: tool.name, result: "abandoned", storeMs, auditMs });
        throw new CallAbandonedError();
      } else {
        await this.store.abandon(request.scope, key, token).catch(() => {});
        this.audit.outcome({
          id: executionId,
          outcome: "failed",
          finishedAt: new Date(this.now()),
          durationMs: Math.round(performance.now() - started),
          resultStatus: null,
          resultBody: null,
          resultFinal: null,
          expiresAt: null,
          error: err instanceof Error ? err.message : String(err),
        });
        this.onCall({ tool: tool.name, result: "tool_failed", storeMs, auditMs });
        if (isIdemgateError(err)) throw err;
        throw new ToolFailedError(err instanceof Error ? err.message : String(err));
      }
    }
    const durationMs = Math.round(performance.now() - started);

    const completedMs = this.now();
    const t2 = performance.now();
    let late = false;
    let completionError: string | null = null;
    try {
      const done = await this.store.complete(request.scope, key, token, stored, ttlMs, completedMs);
      if (done.ok) this.replayCache?.remember(done.record, completedMs);
      else if (done.reason === "stale_token") late = true;
      // The reservation vanished with the store's data: the result stands and is kept in the log,
      // from where the next duplicate is answered (recoverFromAudit).
      else completionError = "completion not stored: the key store lost the reservation while the tool ran";
    } catch (err) {
      // The side effect happened; its record could not be stored. The caller still gets the result;
      // the reconciler sees a succeeded execution without a done record (lost completion).
      completionError = `completion not stored: ${err instanceof Error ? err.message : String(err)}`;
    }
    storeMs += performance.now() - t2;

    this.audit.outcome({
      id: executionId,
      outcome: late ? "late_completion" : stored.final ? "final_error" : "succeeded",
      finishedAt: new Date(completedMs),
      durationMs,
      resultStatus: stored.status,
      resultBody: stored.body,
      resultFinal: stored.final,
      // a late result is kept too: when no later execution ran (the key was only probed after a
      // store loss), it is the action's one result and duplicates are answered with it
      expiresAt: new Date(completedMs + ttlMs),
      error: late ? "completion refused: the reservation was released or taken over while the tool ran" : completionError,
    });
    this.onCall({ tool: tool.name, result: stored.final ? "final_error" : "executed", storeMs, auditMs });
    return { kind: "executed", status: stored.status, body: stored.body, key, executionId, fallback, lateCompletion: late };
  }

  /**
   * Whether the audit log may know of results recorded before this store epoch that are still
   * wanted. Asked once per epoch: on a fresh store it answers no, and no call pays a lookup.
   */
  private async mayRecover(epochMs: number, arrivedMs: number, token: number, call: CallContext): Promise<boolean> {
    // A call that reserved just before the loss may not have written its intent yet, so a window
    // computed now could miss it: until intents from before the epoch have settled, look every
    // key up (one indexed read per first execution, for the first seconds of a store epoch).
    if (arrivedMs < epochMs + INTENT_SETTLE_MS) return true;
    let end = this.recoveryEnds.get(epochMs);
    if (!end) {
      if (this.recoveryEnds.size > 1_000) this.recoveryEnds.clear();
      end = this.audit.recoveryWindowEnd(epochMs);
      this.recoveryEnds.set(epochMs, end);
      end.catch(() => this.recoveryEnds.delete(epochMs));
    }
    try {
      const until = await end;
      return until !== null && arrivedMs < until;
    } catch (err) {
      await this.store.abandon(call.scope, call.key, token).catch(() => {});
      throw new UnavailableError("audit_log", err);
    }
  }

  /** Records a suppression and answers it: the stored result, or the matching error. */
  private suppressed(kind: SuppressionKind, record: KeyRecord, call: CallContext): InvokeResult {
    if (kind === "replay" && !call.cached) this.replayCache?.remember(record, call.arrivedMs);
    const gapMs = Math.max(0, call.arrivedMs - record.createdAtMs);
    this.audit.suppression({
      id: randomUUID(),
      scope: call.scope,
      key: call.key,
      tool: call.tool.name,
      kind,
      fallback: call.fallback,
      gapMs,
      session: call.session,
      caller: call.caller,
      originalSession: record.session,
      originalExecutionId: record.executionId,
      at: new Date(call.arrivedMs),
    });
    this.onCall({ tool: call.tool.name, result: kind, storeMs: call.storeMs, auditMs: call.auditMs, cached: call.cached ?? false });
    switch (kind) {
      case "replay": {
        const result = record.result;
        if (!result) throw new Error(`done record without a result: ${call.scope}/${call.key}`);
        return { kind: "replayed", status: result.status, body: result.body, key: call.key, record, gapMs, fallback: call.fallback };
      }
      case "conflict":
        // most calls finish in well under a lease: a short wait, not the lease's remainder
        throw new ConflictError(record, CONFLICT_RETRY_AFTER_MS);
      case "stuck":
        throw new StuckKeyError(record);
      case "mismatch":
        throw new MismatchError(record);
    }
  }

  /**
   * After a key-store loss: the latest execution the audit log has for the key decides. A stored
   * result is written back under the reservation and replayed; an execution without an outcome
   * keeps the key blocked (inflight, then stuck) as its lost record would have; other arguments are
   * a mismatch. Returns null when nothing recorded stands in the way.
   */
  private async recoverFromAudit(call: CallContext, token: number, fp: string, ttlMs: number): Promise<InvokeResult | null> {
    let prior: PriorExecution | null;
    try {
      prior = await this.audit.priorExecution(call.scope, call.key, new Date(call.arrivedMs - ttlMs));
    } catch (err) {
      await this.store.abandon(call.scope, call.key, token).catch(() => {});
      throw new UnavailableError("audit_log", err);
    }
    // succeeded, final_error, late_completion (as the latest execution, no other one ran after it)
    // and resolved left a result; open calls still block
    if (!prior || prior.outcome === "failed" || prior.outcome === "released") return null;
    const record = recordFromPrior(call.scope, call.key, prior, call.fallback);
    const keepsResult = prior.outcome !== null && prior.resultBody !== null && prior.expiresAt !== null && prior.expiresAt.getTime() > call.arrivedMs;
    if (prior.fingerprint === fp && keepsResult) {
      const result = { status: prior.resultStatus ?? 200, body: prior.resultBody!, final: prior.resultFinal ?? false };
      const restored = await this.store
        .complete(call.scope, call.key, token, result, prior.expiresAt!.getTime() - call.arrivedMs, call.arrivedMs, { executionId: prior.id })
        .catch(() => null);
      return this.suppressed("replay", restored?.ok ? restored.record : { ...record, result }, call);
    }
    if (prior.outcome !== null && !keepsResult) return null;
    await this.store.abandon(call.scope, call.key, token).catch(() => {});
    if (prior.fingerprint !== fp) return this.suppressed("mismatch", record, call);
    return this.suppressed(prior.leaseUntil.getTime() > call.arrivedMs ? "conflict" : "stuck", record, call);
  }

  /** The operator believes the side effect did not happen: the next call with the key runs it. */
  async release(decision: OperatorDecision): Promise<{ before: KeyRecord }> {
    const out = await this.store.release(decision.scope, decision.key);
    if (out.ok) {
      // the execution ends here as far as the log is concerned; if the store later loses data, the
      // released execution no longer blocks the key
      if (out.before.executionId) await this.audit.closeOpenExecution(out.before.executionId, "released", decision.reason);
      return { before: out.before };
    }
    if (out.reason === "absent") {
      // The key store lost the record, but the audit log still blocks the key (see recoverFromAudit).
      const prior = await this.audit.priorExecution(decision.scope, decision.key, new Date(this.now() - RELEASE_LOOKBACK_MS));
      if (prior && prior.outcome === null && (await this.audit.closeOpenExecution(prior.id, "released", decision.reason))) {
        return { before: recordFromPrior(decision.scope, decision.key, prior, false) };
      }
    }
    throw refusal("release", out.reason, out.current);
  }

  /** The operator confirmed the side effect happened: the key is done with the result they supply. */
  async resolve(decision: OperatorDecision & { result: unknown; status?: number; ttlMs: number }): Promise<{ before: KeyRecord; after: KeyRecord | null }> {
    const stored: StoredResult = { status: decision.status ?? 200, body: serialize(decision.result), final: false };
    const out = await this.store.resolve(decision.scope, decision.key, stored, decision.ttlMs, this.now());
    if (!out.ok) throw refusal("resolve", out.reason, out.current);
    if (out.before.executionId) {
      const expiresAt = new Date(out.after?.expiresAtMs ?? this.now() + decision.ttlMs);
      await this.audit.closeOpenExecution(out.before.executionId, "resolved", decision.reason, { ...stored, expiresAt });
    }
    return { before: out.before, after: out.after };
  }
}

/**
 * How long after its reservation an intent can still be on its way to the log (the database
 * connection timeout is 5 s): a recovery window computed later has seen every intent from before
 * the epoch.
 */
const INTENT_SETTLE_MS = 10_000;

/** What a 409 for a running call asks the caller to wait (Retry-After). */
const CONFLICT_RETRY_AFTER_MS = 1_000;

/** How far back an operator's release looks for an execution blocking a key the store lost. */
const RELEASE_LOOKBACK_MS = 7 * 24 * 60 * 60 * 1000;

interface CallContext {
  tool: ToolPolicy;
  scope: string;
  key: string;
  fallback: boolean;
  session: string | null;
  caller: string | null;
  arrivedMs: number;
  storeMs: number;
  auditMs: number;
  cached?: boolean;
}

/** The record a lost key would have, rebuilt from its execution in the audit log. */
function recordFromPrior(scope: string, key: string, prior: PriorExecution, fallback: boolean): KeyRecord {
  const open = prior.outcome === null;
  return {
    scope,
    key,
    tool: prior.tool,
    fingerprint: prior.fingerprint,
    status: open ? "inflight" : "done",
    token: 0,
    createdAtMs: prior.startedAt.getTime(),
    leaseUntilMs: open ? prior.leaseUntil.getTime() : null,
    completedAtMs: null,
    expiresAtMs: prior.expiresAt?.getTime() ?? null,
    result: null,
    fallback,
    session: prior.session,
    executionId: prior.id,
  };
}

function refusal(action: string, reason: "absent" | "not_inflight", current: KeyRecord | null): InvalidStateError {
  return new InvalidStateError(
    reason === "absent"
      ? `there is no record under this key to ${action}`
      : `only inflight or stuck keys can be ${action}d; this key is ${current?.status ?? "absent"}`,
    current,
  );
}
