import { randomUUID } from "node:crypto";
import type { BeginOutcome, CompleteOutcome, KeyStore, OperatorGuard, OperatorRefusal } from "@/lib/idempotency/key-store";
import { COMPLETION_NOT_STORED, OPEN_CALL_RECOVERY_MS, type AuditWriter, type ExecutionOutcome, type ExecutionRow, type PriorExecution, type SuppressionKind, type Transport } from "./audit-port";
import {
  CallAbandonedError,
  ConflictError,
  ExecutionNotFoundError,
  InvalidStateError,
  isIdemgateError,
  LeasePassedError,
  MismatchError,
  MissingKeyError,
  OutcomeUnknownError,
  StaleTokenError,
  StuckKeyError,
  ToolFailedError,
  TooManyWaitersError,
  UnavailableError,
  UnknownOutcomeKeyError,
} from "./errors";
import { canonicalJson, fingerprint as fingerprintOf } from "./fingerprint";
import { keptArguments, type KeptArguments } from "./kept-arguments";
import { redactAnswerText } from "./redaction";
import { FALLBACK_PREFIX, fallbackKey, PASS_THROUGH_PREFIX, passThroughKey, validateKey } from "./key-rules";
import { exceptionNote, noteWithDetail, PUBLIC_THREW_NOTE } from "./outcome-note";
import type { KeyRecord, StoredResult } from "./record";
import { DuplicateRate } from "./duplicate-rate";
import type { ReplayCache } from "./replay-cache";
import { isOverLimitResult, type ScopeResultLimit } from "./scope-result-limit";
import { answerWhilePaused, pauseOf, type PausedTools } from "./paused-tools";
import { DEFAULT_POLICY, isAbandonCall, isFinalToolError, isNotRunError, isOutcomeUnknown, leaseMarginMs, type RunTool, type ToolPolicy, type ToolResult } from "./tool";

export interface InvokeRequest {
  scope: string;
  /** the caller's Idempotency-Key; null or undefined when none was sent */
  key?: string | null;
  args: unknown;
  session?: string | null;
  /** who called (an API token's id), for the audit log */
  caller?: string | null;
  /** how the call came in, recorded with its execution or suppression (default http) */
  transport?: Transport;
  /**
   * `Prefer: wait`: while a call with this key runs, hold this one up to this long (at most 60 s)
   * and answer it as a retry arriving when that call ends would be answered
   */
  waitMs?: number;
  /**
   * who minted the key: the orchestration layer (authoritative, the default) or a model
   * (advisory: also checked against the tool's arguments window, see DESIGN.md)
   */
  keySource?: KeySource;
}

export type KeySource = "orchestrator" | "model";

/** What reserve answers: the reservation (run the side effect now, then settle it), or a replay. */
export type ReserveResult =
  | { kind: "reserved"; key: string; executionId: string; token: number; leaseUntilMs: number; fallback: boolean }
  | Extract<InvokeResult, { kind: "replayed" }>;

/** Which reservation a settle is about: the caller's scope, the execution and the token it was given. */
export interface SettleTarget {
  scope: string;
  executionId: string;
  token: number;
  /**
   * the policy of a tool by name, for a reservation this process does not hold in memory (reserved
   * through another server process); only tools that run in their caller's process may be settled
   */
  policyOf: (tool: string) => ToolPolicy | undefined;
}

/** How a settle left the key. `replayed`: the same completion sent again, answered as the first. */
export type SettleResult =
  | { state: "done"; status: number; body: string; replayed: boolean; expiresAtMs: number | null; executionId: string }
  | { state: "released" }
  | { state: "unknown" }
  | { state: "reserved"; leaseUntilMs: number };

/** The longest a reservation may be held by heartbeats, from when it was made. */
export const MAX_RESERVATION_MS = 24 * 60 * 60 * 1000;

export type { Transport };

export type InvokeResult =
  | { kind: "executed"; status: number; body: string; key: string; executionId: string; fallback: boolean; lateCompletion: boolean }
  | { kind: "replayed"; status: number; body: string; key: string; record: KeyRecord; gapMs: number; fallback: boolean }
  /** executionId: for a read the audit log records (a pass-through call), its execution */
  | { kind: "read"; status: number; body: string; executionId?: string };

export interface EngineOptions {
  store: KeyStore;
  audit: AuditWriter;
  now?: () => number;
  /** observes each finished call (metrics); must not throw */
  onCall?: (event: CallEvent) => void;
  /** answers duplicates of done keys this process has seen without a store round trip */
  replayCache?: ReplayCache | null;
  /** calls this process may hold at once for `Prefer: wait` (default 1,000); beyond, 503 */
  maxWaiters?: number;
  /**
   * calls of one scope this process may hold at once for `Prefer: wait` (default a quarter of
   * maxWaiters, at least 1); beyond, 503 for that scope only
   */
  maxWaitersPerScope?: number;
  /**
   * When to read a key before reserving it, on a store that offers the read (KeyStore.peekReplay):
   * "adaptive" (the default) for a tool whose recent calls that reached the store were mostly
   * replays (DuplicateRate); "always" or "never" for tests and benchmarks. The answer is the same
   * either way: a read that finds no replay goes on to reserve.
   */
  replayReads?: "adaptive" | "always" | "never";
  /** the per-scope limit on stored result bytes: a result over it is stored as a placeholder */
  scopeResultLimit?: ScopeResultLimit | null;
  /** the tools operators paused: their new first executions are refused before anything is reserved */
  pausedTools?: PausedTools | null;
}

/** A replay a client answered from its own cache of done results, reported afterwards for the audit log. */
export interface ClientReplay {
  tool: string;
  key: string;
  /** the execution whose result the client replayed */
  executionId: string;
  /** how long before the report arrived the replay happened, by the client's clock */
  ageMs: number;
  session?: string | null;
}

export interface CallEvent {
  tool: string;
  result: "executed" | "replayed" | "read" | SuppressionKind | "missing_key" | "unavailable" | "tool_failed" | "outcome_unknown" | "abandoned" | "final_error";
  storeMs: number;
  auditMs: number;
  /** answered from the engine's replay cache, without the key store */
  cached?: boolean;
}

/** An operator's (or a probe's) decision about a stuck or unknown key. */
export interface OperatorDecision {
  scope: string;
  key: string;
  actor: string;
  reason: string;
  /** also decide about an inflight key whose lease is still valid: its call may still complete */
  force?: boolean;
  /**
   * the fencing token of the reservation the decision is about (the record a probe asked about, or
   * an operator read); when another call holds the key by now, the decision is refused
   */
  token?: number;
}

function serialize(body: unknown): string {
  return JSON.stringify(body ?? null);
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
  private readonly maxWaiters: number;
  private readonly maxWaitersPerScope: number;
  private waiters = 0;
  /** waiting calls per scope; a scope with none has no entry */
  private readonly scopeWaiters = new Map<string, number>();
  private readonly replayReads: "adaptive" | "always" | "never";
  private readonly duplicateRate = new DuplicateRate();
  private readonly scopeResultLimit: ScopeResultLimit | null;
  readonly pausedTools: PausedTools | null;

  constructor(options: EngineOptions) {
    this.pausedTools = options.pausedTools ?? null;
    this.scopeResultLimit = options.scopeResultLimit ?? null;
    this.maxWaiters = options.maxWaiters ?? DEFAULT_MAX_WAITERS;
    this.maxWaitersPerScope = Math.min(this.maxWaiters, options.maxWaitersPerScope ?? Math.max(1, Math.floor(this.maxWaiters * SCOPE_WAITERS_SHARE)));
    this.store = options.store;
    this.audit = options.audit;
    this.now = options.now ?? Date.now;
    this.onCall = options.onCall ?? (() => {});
    this.replayCache = options.replayCache ?? null;
    this.replayReads = this.store.peekReplay ? (options.replayReads ?? "adaptive") : "never";
  }

  async invoke(tool: ToolPolicy, run: RunTool, request: InvokeRequest): Promise<InvokeResult> {
    if (tool.kind === "read") {
      if (tool.audited) return this.passThrough(tool, run, request);
      const result = await run(request.args, { scope: request.scope, key: null, session: request.session ?? null, executionId: null });
      this.onCall({ tool: tool.name, result: "read", storeMs: 0, auditMs: 0 });
      return { kind: "read", status: result.status ?? 200, body: serialize(result.body) };
    }
    const call = this.admit(tool, request);
    const acquired = await this.acquire(call, request.waitMs);
    if (!("token" in acquired)) return acquired;
    return this.settle(call, acquired.token, await this.execute(call, run, request.args));
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
    const call = this.admit(tool, request);
    call.durableIntent = true;
    const acquired = await this.acquire(call, request.waitMs);
    if (!("token" in acquired)) return acquired as Extract<InvokeResult, { kind: "replayed" }>;
    call.token = acquired.token;
    this.rememberHeld(call);
    return {
      kind: "reserved",
      key: call.key,
      executionId: call.executionId,
      token: acquired.token,
      leaseUntilMs: call.arrivedMs + tool.leaseMs,
      fallback: call.fallback,
    };
  }

  /** Calls waiting out a running call with their key (`Prefer: wait`) now: in all, or of one scope. */
  waitingCalls(scope?: string): number {
    return scope === undefined ? this.waiters : (this.scopeWaiters.get(scope) ?? 0);
  }

  /**
   * Steps 1 and 2 for one call, waiting out a running call with this key when `Prefer: wait` asks
   * to: the reservation's token, or the answer when nothing may run.
   */
  private async acquire(call: CallContext, waitMs: number | undefined): Promise<{ token: number } | InvokeResult> {
    const cached = this.replayCache?.get(call.scope, call.key, call.arrivedMs);
    if (cached) return this.suppressed(cached.fingerprint === call.fingerprint ? "replay" : "mismatch", cached, { ...call, cached: true });

    const waitUntil = waitMs ? performance.now() + Math.min(waitMs, MAX_WAIT_MS) : null;
    let holdsWaitSlot = false;
    try {
      for (;;) {
        const reservation = await this.reserveKey(call, waitUntil !== null);
        if ("token" in reservation) return reservation;
        if (!("running" in reservation)) return reservation;
        // Prefer: wait — hold the duplicate until the running call ends, then answer it as a retry
        // arriving then would be answered (the result, or the unknown/stuck answer).
        if (performance.now() >= waitUntil!) return this.suppressed("conflict", reservation.running, call);
        if (!holdsWaitSlot) {
          // One tenant's waiters may not take every slot: a scope holds at most its share, so the
          // others can still wait while one fills its own (each slot is a held request and a timer).
          const ofScope = this.scopeWaiters.get(call.scope) ?? 0;
          if (ofScope >= this.maxWaitersPerScope) throw new TooManyWaitersError(this.maxWaitersPerScope, "scope");
          if (this.waiters >= this.maxWaiters) throw new TooManyWaitersError(this.maxWaiters, "process");
          this.waiters++;
          this.scopeWaiters.set(call.scope, ofScope + 1);
          holdsWaitSlot = true;
        }
        await this.waitForRunning(call, reservation.running, waitUntil!);
      }
    } finally {
      if (holdsWaitSlot) {
        this.waiters--;
        const left = (this.scopeWaiters.get(call.scope) ?? 1) - 1;
        if (left > 0) this.scopeWaiters.set(call.scope, left);
        else this.scopeWaiters.delete(call.scope);
      }
    }
  }

  /**
   * A read the audit log records: a tool that is idempotent by its own word (an MCP server's
   * `idempotentHint`), passed through without a key. Nothing is reserved and nothing replayed; the
   * call is an execution under a key of its own (`passthrough:<execution id>`, never a caller's),
   * with its caller, session and transport. Its intent is written before it runs, as a write's is
   * (no intent, no call), and its outcome as a write's would be, but it holds nothing: the caller
   * may call again at any time. Errors reach the caller as a read's do.
   */
  private async passThrough(tool: ToolPolicy, run: RunTool, request: InvokeRequest): Promise<InvokeResult> {
    const executionId = randomUUID();
    const startedMs = this.now();
    const t0 = performance.now();
    try {
      await this.audit.intent({
        id: executionId,
        scope: request.scope,
        key: passThroughKey(executionId),
        tool: tool.name,
        fingerprint: fingerprintOf(tool.name, request.args),
        token: 0,
        session: request.session ?? null,
        caller: request.caller ?? null,
        transport: request.transport ?? "http",
        fallback: false,
        startedAt: new Date(startedMs),
        leaseUntil: new Date(startedMs + tool.leaseMs),
        ...intentArguments(keptArguments(request.args, tool.argumentRetention)),
      });
    } catch (err) {
      this.onCall({ tool: tool.name, result: "unavailable", storeMs: 0, auditMs: performance.now() - t0 });
      throw new UnavailableError("audit_log", err);
    }
    const auditMs = performance.now() - t0;
    const started = performance.now();
    const ended = (outcome: ExecutionOutcome, resultStatus: number | null, error: string | null) => {
      this.audit.outcome({
        id: executionId,
        outcome,
        finishedAt: new Date(this.now()),
        durationMs: Math.round(performance.now() - started),
        resultStatus,
        resultBody: null,
        resultFinal: null,
        expiresAt: null,
        error,
      });
      this.onCall({ tool: tool.name, result: "read", storeMs: 0, auditMs });
    };
    let result: ToolResult;
    try {
      result = await run(request.args, { scope: request.scope, key: null, session: request.session ?? null, executionId });
    } catch (err) {
      if (isFinalToolError(err)) ended("final_error", err.status, null);
      else if (isNotRunError(err)) ended("failed", null, err.message);
      else ended("unknown", null, isOutcomeUnknown(err) ? noteWithDetail(err.note, err.detail) : exceptionNote(err instanceof Error ? err.message : String(err)));
      throw err;
    }
    const status = result.status ?? 200;
    ended(status >= 400 ? "final_error" : "succeeded", status, null);
    return { kind: "read", status, body: serialize(result.body), executionId };
  }

  /**
   * Until the running call's record changes (the store wakes us), its lease ends (a crashed holder
   * sends nothing), FALLBACK_POLL_MS passes (a notice may be lost) or the wait is over.
   */
  private async waitForRunning(call: CallContext, running: KeyRecord, waitUntil: number): Promise<void> {
    const untilLeaseEnds = (running.leaseUntilMs ?? Infinity) - this.now() + 1;
    await this.store.waitForChange(call.scope, call.key, Math.max(1, Math.min(waitUntil - performance.now(), FALLBACK_POLL_MS, untilLeaseEnds)));
    call.arrivedMs = this.now();
  }

  /** The call's key (its own, or the fallback key of its arguments) and what the log needs of it. */
  private admit(tool: ToolPolicy, request: InvokeRequest): CallContext {
    const fingerprint = fingerprintOf(tool.name, request.args);
    let key: string;
    let fallback = false;
    let ttlMs = tool.ttlMs;
    if (request.key === null || request.key === undefined) {
      if (tool.fallbackTtlMs === null) {
        this.onCall({ tool: tool.name, result: "missing_key", storeMs: 0, auditMs: 0 });
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
      arrivedMs: this.now(),
      storeMs: 0,
      auditMs: 0,
      arguments: keptArguments(request.args, tool.argumentRetention),
      window: advisory ? { key: fallbackKey(fingerprint), ttlMs: tool.fallbackTtlMs ?? DEFAULT_POLICY.fallbackDefaultTtlMs, token: null } : null,
    };
  }

  /**
   * Steps 1 and 2 of the write order: reserve the key (or answer the record in the way) and write
   * the execution's intent. Returns the reservation's token, or the answer when nothing may run.
   */
  private async reserveKey(call: CallContext, mayWait = false): Promise<{ token: number } | { running: KeyRecord } | InvokeResult> {
    const { tool } = call;
    let begun: BeginOutcome;
    const pause = pauseOf(tool, this.pausedTools);
    if (pause) {
      const held = await answerWhilePaused(this.store, call, pause);
      return held.kind === "conflict" && mayWait ? { running: held.record } : this.suppressed(held.kind, held.record, call);
    }
    const t0 = performance.now();
    if (this.replayReads === "always" || (this.replayReads === "adaptive" && this.duplicateRate.mostlyDuplicates(tool.name))) {
      // a failed read is no answer: begin below decides, and reports the store if it is down
      const done = await this.store.peekReplay!(call.scope, call.key, call.fingerprint, call.arrivedMs).catch(() => null);
      if (done) {
        this.duplicateRate.observe(tool.name, true);
        call.storeMs += performance.now() - t0;
        return this.suppressed("replay", done, call);
      }
    }
    try {
      begun = await this.store.begin({
        scope: call.scope,
        key: call.key,
        tool: tool.name,
        fingerprint: call.fingerprint,
        leaseMs: tool.leaseMs,
        nowMs: call.arrivedMs,
        fallback: call.fallback,
        session: call.session,
        executionId: call.executionId,
        // a service that deduplicates on the forwarded key cannot apply a resend twice
        takeoverStuck: tool.stuckPolicy === "takeover" || tool.dedupes,
        retryUnknown: tool.dedupes,
      });
    } catch (err) {
      this.onCall({ tool: tool.name, result: "unavailable", storeMs: performance.now() - t0, auditMs: call.auditMs });
      throw new UnavailableError("key_store", err);
    }
    call.storeMs += performance.now() - t0;
    this.duplicateRate.observe(tool.name, begun.kind === "replay");
    if (begun.kind === "conflict" && mayWait) return { running: begun.record };
    if (begun.kind !== "reserved") return this.suppressed(begun.kind, begun.record, call);

    const token = begun.token;
    if (
      begun.takenOver === null &&
      begun.storeEpochMs !== null &&
      // a result lost with the store matters for its TTL, an unfinished call for longer
      call.arrivedMs - begun.storeEpochMs < recoveryHorizonMs(call.ttlMs) &&
      (await this.mayRecover(begun.storeEpochMs, call.arrivedMs, token, call))
    ) {
      // This part of the key store holds data only since its epoch: a result recorded before may
      // have been lost with it. The audit log still knows; answer from it rather than run again.
      const recovered = await this.recoverFromAudit(call, token);
      if (recovered) return recovered;
    }
    if (begun.takenOver?.executionId) {
      // the earlier call is over as far as the log is concerned: its key now belongs to this one
      const resent = begun.takenOver.status === "unknown" || tool.dedupes;
      await this.audit
        .closeOpenExecution(
          begun.takenOver.executionId,
          resent ? "retried" : "released",
          resent ? "its outcome was unknown; the service deduplicates on the forwarded key" : "taken over after its lease passed (stuck policy takeover)",
        )
        .catch(() => false);
    }

    if (call.window) {
      const answered = await this.reserveWindow(call, token);
      if (answered) return answered;
    }

    const t1 = performance.now();
    try {
      await this.audit.intent({
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
      }, call.durableIntent ? { durable: true } : undefined);
    } catch (err) {
      // No intent, no side effect: give the key back so a retry can run once the log is back.
      await this.store.abandon(call.scope, call.key, token).catch(() => {});
      await this.settleWindow(call, { class: "not_run" });
      if (isIdemgateError(err, "open_execution")) {
        // The store lost the reservation of a call that is still running; the log caught it.
        return this.suppressed("conflict", begun.record, { ...call, auditMs: performance.now() - t1 });
      }
      this.onCall({ tool: tool.name, result: "unavailable", storeMs: call.storeMs, auditMs: performance.now() - t1 });
      throw new UnavailableError("audit_log", err);
    }
    call.auditMs += performance.now() - t1;
    const leaseUntilMs = call.arrivedMs + tool.leaseMs;
    if (this.now() + (tool.runTimeoutMs ?? 0) >= leaseUntilMs - leaseMarginMs(tool.leaseMs)) {
      // The intent took so much of the lease that the call could outlive it: from its end another
      // caller may take the key over (stuck policy takeover, a service that deduplicates) and run it
      // too. Do not run: the intent ends as not run, the key is given back, the caller retries
      // with the same key.
      await this.store.abandon(call.scope, call.key, token).catch(() => {});
      await this.settleWindow(call, { class: "not_run" });
      this.audit.outcome({
        id: call.executionId,
        outcome: "failed",
        finishedAt: new Date(this.now()),
        durationMs: 0,
        resultStatus: null,
        resultBody: null,
        resultFinal: null,
        expiresAt: null,
        error: "not run: its intent was written too late in its lease for the call to finish within it",
      });
      this.onCall({ tool: tool.name, result: "unavailable", storeMs: call.storeMs, auditMs: call.auditMs });
      throw new LeasePassedError(leaseUntilMs);
    }
    return { token };
  }

  /**
   * An advisory key's second check: the (tool, arguments) window, under the fallback key of the
   * call's fingerprint. An identical call under another fresh key within the window is this call's
   * duplicate: its own key then becomes an alias of that call's result (or is given back while that
   * call runs or is held), and nothing runs. Returns the answer, or null when this call may run.
   */
  private async reserveWindow(call: CallContext, token: number): Promise<InvokeResult | null> {
    const window = call.window!;
    let begun: BeginOutcome;
    const t = performance.now();
    try {
      begun = await this.store.begin({
        scope: call.scope,
        key: window.key,
        tool: call.tool.name,
        fingerprint: call.fingerprint,
        leaseMs: call.tool.leaseMs,
        nowMs: call.arrivedMs,
        fallback: true,
        session: call.session,
        executionId: call.executionId,
        takeoverStuck: false,
        retryUnknown: false,
      });
    } catch (err) {
      await this.store.abandon(call.scope, call.key, token).catch(() => {});
      this.onCall({ tool: call.tool.name, result: "unavailable", storeMs: call.storeMs + performance.now() - t, auditMs: call.auditMs });
      throw new UnavailableError("key_store", err);
    }
    call.storeMs += performance.now() - t;
    if (begun.kind === "reserved") {
      window.token = begun.token;
      return null;
    }
    const first = begun.record;
    if (begun.kind === "replay" && first.result) {
      // the call's own key answers like the first call from now on
      const aliased = await this.store
        .complete(call.scope, call.key, token, first.result, call.ttlMs, call.arrivedMs, { executionId: first.executionId ?? undefined })
        .catch(() => null);
      if (!aliased?.ok) await this.store.abandon(call.scope, call.key, token).catch(() => {});
      return this.suppressed("fresh_key", first, call);
    }
    await this.store.abandon(call.scope, call.key, token).catch(() => {});
    return this.suppressed(begun.kind === "replay" ? "conflict" : begun.kind, first, { ...call, fallback: true });
  }

  /** Gives an advisory call's window reservation the outcome of its own key. */
  private async settleWindow(call: CallContext, ended: { class: "done"; stored: StoredResult } | { class: "not_run" } | { class: "unknown"; note: string }): Promise<void> {
    const window = call.window;
    if (!window || window.token === null) return;
    const { key, token, ttlMs } = window;
    const now = this.now();
    const settled =
      ended.class === "done"
        ? this.store.complete(call.scope, key, token, ended.stored, ttlMs, now)
        : ended.class === "not_run"
          ? this.store.abandon(call.scope, key, token)
          : this.store.markUnknown(call.scope, key, token, ended.note, now);
    // a window reservation that cannot be settled turns stuck after its lease: still held
    await settled.catch(() => {});
  }

  /** Step 3: runs the tool and sorts how it ended into the outcome classes. */
  private async execute(call: CallContext, run: RunTool, args: unknown): Promise<Ended> {
    const started = performance.now();
    const took = () => Math.round(performance.now() - started);
    try {
      const result: ToolResult = await run(args, { scope: call.scope, key: call.key, session: call.session, executionId: call.executionId });
      return { class: "done", stored: { status: result.status ?? 200, body: serialize(result.body), final: false }, durationMs: took() };
    } catch (err) {
      if (isFinalToolError(err)) return { class: "done", stored: { status: err.status, body: serialize(err.body), final: true }, durationMs: took() };
      if (isNotRunError(err)) return { class: "not_run", message: err.message, upstreamStatus: err.upstreamStatus, durationMs: took() };
      if (isAbandonCall(err)) return { class: "abandoned" };
      // Only the tool's own word that nothing happened frees a key: anything else may have happened.
      // a tool's detail (another server's error text) is for operators too
      if (isOutcomeUnknown(err)) return { class: "unknown", note: noteWithDetail(err.note, err.detail), publicNote: err.note, timedOut: err.timedOut, durationMs: took(), answer: keptAnswer(err.answer) };
      // the exception's message is for operators (key detail, audit log), not for the caller
      const message = err instanceof Error ? err.message : String(err);
      return { class: "unknown", note: exceptionNote(message), publicNote: PUBLIC_THREW_NOTE, timedOut: false, durationMs: took() };
    }
  }

  /** Steps 4 and 5: the key ends done, released or unknown, and the log records how. */
  private async settle(call: CallContext, token: number, ended: Ended): Promise<InvokeResult> {
    const { tool } = call;
    switch (ended.class) {
      case "abandoned":
        this.onCall({ tool: tool.name, result: "abandoned", storeMs: call.storeMs, auditMs: call.auditMs });
        throw new CallAbandonedError();
      case "not_run": {
        await this.store.abandon(call.scope, call.key, token).catch(() => {});
        await this.settleWindow(call, ended);
        this.recordOutcome(call, "failed", ended.durationMs, null, ended.message);
        this.onCall({ tool: tool.name, result: "tool_failed", storeMs: call.storeMs, auditMs: call.auditMs });
        throw new ToolFailedError(ended.message, ended.upstreamStatus, call.executionId);
      }
      case "unknown": {
        const t = performance.now();
        const marked = await this.store.markUnknown(call.scope, call.key, token, ended.note, this.now()).catch(() => null);
        await this.settleWindow(call, ended);
        call.storeMs += performance.now() - t;
        // Not marked: the key was released or taken over meanwhile (recorded as such), or the
        // store is down (the reservation stays inflight and turns stuck: still held).
        const note = marked === null || marked.ok ? ended.note : `${ended.note}; the key had been released or taken over meanwhile`;
        this.recordOutcome(call, "unknown", ended.durationMs, null, note, ended.answer);
        this.onCall({ tool: tool.name, result: "outcome_unknown", storeMs: call.storeMs, auditMs: call.auditMs });
        throw new OutcomeUnknownError(call.key, call.executionId, ended.publicNote, ended.timedOut, tool.dedupes);
      }
      case "done":
        return this.complete(call, token, ended.stored, ended.durationMs);
    }
  }

  /**
   * The result to store: over its scope's limit on stored bytes, a placeholder (the call is done all
   * the same). A count that cannot be read or written keeps the result: it is not worth losing one.
   */
  private async withinScopeLimit(scope: string, stored: StoredResult, ttlMs: number, nowMs: number): Promise<StoredResult> {
    if (!this.scopeResultLimit) return stored;
    return this.scopeResultLimit.admit(scope, stored, ttlMs, nowMs).catch(() => stored);
  }

  private async complete(call: CallContext, token: number, result: StoredResult, durationMs: number): Promise<InvokeResult> {
    const completedMs = this.now();
    const stored = await this.withinScopeLimit(call.scope, result, call.ttlMs, completedMs);
    const t = performance.now();
    let late = false;
    let completionError: string | null = null;
    try {
      const done = await this.store.complete(call.scope, call.key, token, stored, call.ttlMs, completedMs);
      if (done.ok) this.replayCache?.remember(done.record, completedMs);
      else if (done.reason === "stale_token") late = true;
      // The reservation is gone: an operator released it while the tool ran (the log turns this
      // outcome into a late completion), or the key store lost it with its data. The side effect
      // happened, so the result goes back under the key unless another call holds it by now.
      else if (!(await this.restore(call, stored, completedMs))) {
        completionError = `${COMPLETION_NOT_STORED}: the reservation was released, or lost by the key store, while the tool ran`;
      }
    } catch (err) {
      // The side effect happened; its record could not be stored. The caller still gets the result;
      // the reconciler sees a succeeded execution without a done record (lost completion).
      completionError = `${COMPLETION_NOT_STORED}: ${err instanceof Error ? err.message : String(err)}`;
    }
    await this.settleWindow(call, { class: "done", stored });
    call.storeMs += performance.now() - t;

    this.audit.outcome({
      id: call.executionId,
      outcome: late ? "late_completion" : stored.final ? "final_error" : "succeeded",
      finishedAt: new Date(completedMs),
      durationMs,
      resultStatus: stored.status,
      resultBody: stored.body,
      resultFinal: stored.final,
      // a late result is kept too: when no later execution ran (the key was only probed after a
      // store loss), it is the action's one result and duplicates are answered with it
      expiresAt: new Date(completedMs + call.ttlMs),
      error: late ? "completion refused: the reservation was released or taken over while the tool ran" : completionError,
    });
    this.onCall({ tool: call.tool.name, result: stored.final ? "final_error" : "executed", storeMs: call.storeMs, auditMs: call.auditMs });
    // the caller gets its result even when only a placeholder of it was stored
    return { kind: "executed", status: result.status, body: result.body, key: call.key, executionId: call.executionId, fallback: call.fallback, lateCompletion: late };
  }

  /**
   * Stores a result whose reservation vanished while the tool ran, if the key is still free: a
   * new reservation completed at once under this execution. Whatever holds the key now wins.
   */
  private async restore(call: CallContext, stored: StoredResult, completedMs: number): Promise<boolean> {
    const again = await this.store.begin({
      scope: call.scope,
      key: call.key,
      tool: call.tool.name,
      fingerprint: call.fingerprint,
      leaseMs: call.tool.leaseMs,
      nowMs: completedMs,
      fallback: call.fallback,
      session: call.session,
      executionId: call.executionId,
      takeoverStuck: false,
      retryUnknown: false,
    });
    if (again.kind !== "reserved") return false;
    const done = await this.store.complete(call.scope, call.key, again.token, stored, call.ttlMs, completedMs, { executionId: call.executionId });
    if (done.ok) this.replayCache?.remember(done.record, completedMs);
    return done.ok;
  }

  private recordOutcome(call: CallContext, outcome: "failed" | "unknown", durationMs: number, resultStatus: number | null, error: string, answer?: { status: number; body: string } | null): void {
    this.audit.outcome({
      id: call.executionId,
      outcome,
      finishedAt: new Date(this.now()),
      durationMs,
      resultStatus,
      resultBody: null,
      resultFinal: null,
      expiresAt: null,
      error,
      ...(answer ? { answerStatus: answer.status, answerBody: answer.body } : {}),
    });
  }

  /**
   * Whether the audit log may know of results recorded before this store epoch that are still
   * wanted. Asked once per epoch: on a fresh store it answers no, and no call pays a lookup.
   */
  private async mayRecover(epochMs: number, arrivedMs: number, token: number, call: CallContext): Promise<boolean> {
    try {
      return await this.recoveryWanted(epochMs, arrivedMs);
    } catch (err) {
      await this.store.abandon(call.scope, call.key, token).catch(() => {});
      throw new UnavailableError("audit_log", err);
    }
  }

  /** mayRecover's answer; rejects when the audit log cannot be read. */
  private async recoveryWanted(epochMs: number, arrivedMs: number): Promise<boolean> {
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
    const until = await end;
    return until !== null && arrivedMs < until;
  }

  /**
   * Whether a retry of an execution's call (the same arguments), arriving at `nowMs` while the key
   * store has no record under its key, gets the execution's result back from the audit log (and
   * the store the record again) instead of running: the store can lose data, a reservation there
   * now would consult the log (as reserve does), and the key's latest execution in the log is this
   * one with its result kept. A durable store never consults the log: there a retry runs.
   */
  async retryRestores(scope: string, key: string, executionId: string, nowMs: number = this.now()): Promise<boolean> {
    if (!this.store.epochOf) return false;
    const prior = await this.audit.priorExecution(scope, key, new Date(0));
    if (!prior || prior.id !== executionId || !keepsResult(prior, nowMs)) return false;
    // no epoch: the store holds nothing there now, and the reservation starts a new one
    const epochMs = (await this.store.epochOf(scope, key)) ?? nowMs;
    const ttlMs = prior.expiresAt!.getTime() - (prior.finishedAt ?? prior.startedAt).getTime();
    return nowMs - epochMs < recoveryHorizonMs(ttlMs) && (await this.recoveryWanted(epochMs, nowMs));
  }

  /**
   * After a key-store loss, what a retry does for a call the audit log holds open (its outcome was
   * unknown, or it never reported one and its lease passed) while the store has no record under its
   * key, done without a retry: the key is reserved and held as unknown for that execution, so the
   * store's lists, counts, probes and operator decisions see it. Returns the key's record now (the
   * restored one, or whatever holds the key), or null when the log holds no such call for the key.
   */
  async restoreHeld(scope: string, key: string, nowMs: number = this.now()): Promise<KeyRecord | null> {
    return (await this.restoreFromLog(scope, key, nowMs))?.record ?? null;
  }

  /** restoreHeld, with the execution the record was restored for (null: the key was held already). */
  private async restoreFromLog(scope: string, key: string, nowMs: number): Promise<{ record: KeyRecord; prior: PriorExecution | null } | null> {
    if (key.startsWith(PASS_THROUGH_PREFIX)) return null;
    const seen = await this.audit.priorExecution(scope, key, new Date(0));
    if (!seen || !heldOpen(seen, nowMs)) return null;
    const begun = await this.store.begin({
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
    const prior = await this.audit.priorExecution(scope, key, new Date(0)).catch(async (err: unknown) => {
      await this.store.abandon(scope, key, begun.token).catch(() => {});
      throw err;
    });
    const record = prior && prior.id === seen.id && heldOpen(prior, nowMs) ? await this.holdAsUnknown(scope, key, begun.token, prior, nowMs) : null;
    if (!record) {
      await this.store.abandon(scope, key, begun.token).catch(() => {});
      return null;
    }
    return { record, prior };
  }

  /**
   * The one way a key is held again from the log after a key-store loss: the reservation under
   * `token` becomes an unknown record standing for the execution the log holds open.
   */
  private async holdAsUnknown(scope: string, key: string, token: number, prior: PriorExecution, nowMs: number): Promise<KeyRecord | null> {
    const unknownAtMs = prior.outcome === "unknown" ? (prior.finishedAt?.getTime() ?? nowMs) : prior.leaseUntil.getTime();
    const marked = await this.store.markUnknown(scope, key, token, heldNote(prior), unknownAtMs, { executionId: prior.id }).catch(() => null);
    return marked?.ok ? marked.record : null;
  }

  /**
   * Replays a client answered from its own cache (lib/client), written to the audit log as the
   * suppressions the gateway would have written had each reached it: kind replay, the gap from the
   * original execution's start, the caller's session. An item is recorded only when its key in this
   * scope is done with the result of that execution and had not expired when the replay happened;
   * anything else (another scope's key, another execution, a key never done) is ignored and counted.
   */
  async recordClientReplays(scope: string, caller: string | null, items: readonly ClientReplay[]): Promise<{ recorded: number; ignored: number }> {
    const nowMs = this.now();
    let recorded = 0;
    for (let i = 0; i < items.length; i += CLIENT_REPLAY_READS) {
      const batch = items.slice(i, i + CLIENT_REPLAY_READS);
      const records = await Promise.all(
        batch.map(async (item) => {
          const hitMs = nowMs - item.ageMs;
          const cached = this.replayCache?.get(scope, item.key, hitMs);
          if (cached) return cached;
          try {
            return await this.store.get(scope, item.key);
          } catch (err) {
            throw new UnavailableError("key_store", err);
          }
        }),
      );
      batch.forEach((item, j) => {
        const record = records[j];
        if (!record || record.status !== "done" || record.result === null || record.tool !== item.tool || record.executionId !== item.executionId) return;
        const atMs = Math.max(record.createdAtMs, nowMs - item.ageMs);
        if (record.expiresAtMs === null || record.expiresAtMs <= atMs) return;
        this.audit.suppression({
          id: randomUUID(),
          scope,
          key: item.key,
          tool: record.tool,
          kind: "replay",
          fallback: record.fallback,
          gapMs: atMs - record.createdAtMs,
          session: item.session ?? null,
          caller,
          transport: "http",
          originalSession: record.session,
          originalExecutionId: record.executionId,
          at: new Date(atMs),
        });
        this.onCall({ tool: record.tool, result: "replay", storeMs: 0, auditMs: 0, cached: true });
        recorded++;
      });
    }
    return { recorded, ignored: items.length - recorded };
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
      transport: call.transport,
      originalSession: record.session,
      originalExecutionId: record.executionId,
      at: new Date(call.arrivedMs),
    });
    this.onCall({ tool: call.tool.name, result: kind, storeMs: call.storeMs, auditMs: call.auditMs, cached: call.cached ?? false });
    switch (kind) {
      case "replay":
      case "fresh_key": {
        const result = record.result;
        if (!result) throw new Error(`done record without a result: ${call.scope}/${call.key}`);
        return { kind: "replayed", status: result.status, body: result.body, key: call.key, record, gapMs, fallback: call.fallback };
      }
      case "conflict":
        throw new ConflictError(record);
      case "stuck":
        throw new StuckKeyError(record);
      case "unknown":
        throw new UnknownOutcomeKeyError(record);
      case "mismatch":
        throw new MismatchError(record);
    }
  }

  /**
   * After a key-store loss: the latest execution the audit log has for the key decides. A stored
   * result is written back under the reservation and replayed; an execution without an outcome
   * keeps the key blocked (inflight, then stuck) as its lost record would have, and one whose
   * outcome was unknown blocks it as unknown again; other arguments are a mismatch. Returns null
   * when nothing recorded stands in the way.
   */
  private async recoverFromAudit(call: CallContext, token: number): Promise<InvokeResult | null> {
    const fp = call.fingerprint;
    let prior: PriorExecution | null;
    try {
      // the key's latest execution however old: a call that never finished holds its key whatever
      // its age (an expired result found there is ignored below)
      prior = await this.audit.priorExecution(call.scope, call.key, new Date(0));
    } catch (err) {
      await this.store.abandon(call.scope, call.key, token).catch(() => {});
      throw new UnavailableError("audit_log", err);
    }
    // succeeded, final_error, late_completion (as the latest execution, no other one ran after it)
    // and resolved left a result; open and unknown calls still block
    if (!prior || prior.outcome === "failed" || prior.outcome === "released" || prior.outcome === "retried") return null;
    const record = recordFromPrior(call.scope, call.key, prior, call.fallback);
    if (heldOpen(prior, call.arrivedMs) && prior.fingerprint === fp) {
      // the record stands for that execution (this call writes no intent): a decision about the
      // key closes it in the log, and a probe is asked about it
      const marked = await this.holdAsUnknown(call.scope, call.key, token, prior, call.arrivedMs);
      return this.suppressed("unknown", marked ?? { ...record, status: "unknown", outcomeNote: heldNote(prior) }, call);
    }
    const keeps = keepsResult(prior, call.arrivedMs);
    if (prior.fingerprint === fp && keeps) {
      const result = { status: prior.resultStatus ?? 200, body: prior.resultBody!, final: prior.resultFinal ?? false };
      const restored = await this.store
        .complete(call.scope, call.key, token, result, prior.expiresAt!.getTime() - call.arrivedMs, call.arrivedMs, { executionId: prior.id })
        .catch(() => null);
      return this.suppressed("replay", restored?.ok ? restored.record : { ...record, result }, call);
    }
    if (prior.outcome !== null && prior.outcome !== "unknown" && !keeps) return null;
    await this.store.abandon(call.scope, call.key, token).catch(() => {});
    if (prior.fingerprint !== fp) return this.suppressed("mismatch", record, call);
    return this.suppressed(prior.leaseUntil.getTime() > call.arrivedMs ? "conflict" : "stuck", record, call);
  }

  /** Reservations handed to callers by this process, until settled (a bounded memory, oldest out first). */
  private readonly held = new Map<string, CallContext>();

  private rememberHeld(call: CallContext): void {
    if (this.held.size >= MAX_HELD_IN_MEMORY) this.held.delete(this.held.keys().next().value!);
    this.held.set(call.executionId, call);
  }

  /**
   * The reservation a settle is about, with its token checked: from this process's memory, or
   * rebuilt from the audit log's intent (reserved through another process). An execution of another
   * scope, of a tool that does not run in its caller's process, or none at all, is the same 404.
   */
  private async heldCall(target: SettleTarget): Promise<CallContext> {
    let call = this.held.get(target.executionId);
    if (call && call.scope !== target.scope) throw new ExecutionNotFoundError();
    if (!call) {
      let row: ExecutionRow | null;
      try {
        row = await this.audit.execution(target.executionId);
      } catch (err) {
        throw new UnavailableError("audit_log", err);
      }
      const tool = row ? target.policyOf(row.tool) : undefined;
      if (!row || row.scope !== target.scope || !tool || tool.runs !== "client" || row.key.startsWith("passthrough:")) throw new ExecutionNotFoundError();
      const windowKey = fallbackKey(row.fingerprint);
      const windowTtlMs = tool.fallbackTtlMs ?? DEFAULT_POLICY.fallbackDefaultTtlMs;
      // An advisory key's window reservation carries this execution's id: settled with it. A read
      // that fails is no answer: taken for "no window", the window would stay inflight and turn
      // stuck, blocking every identical call under a fresh key. Refused instead (503), nothing changed.
      let window: KeyRecord | null = null;
      if (!row.fallback) {
        try {
          window = await this.store.get(target.scope, windowKey);
        } catch (err) {
          throw new UnavailableError("key_store", err);
        }
      }
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
        storeMs: 0,
        auditMs: 0,
        window:
          window && window.executionId === row.id && window.status === "inflight" ? { key: windowKey, ttlMs: windowTtlMs, token: window.token } : null,
        token: row.token,
      };
    }
    if (call.token !== target.token) throw new StaleTokenError(target.executionId, "this is not the token of the reservation; nothing was changed");
    return call;
  }

  /**
   * A client-run call's result (step 4 and 5 of the write order): stored under the key and replayed
   * to every duplicate; a status of 400 or more is a final error, stored the same way. Sent again
   * with the same result, answered as the first time; with another, refused (invalid_state). When
   * the key was released or taken over meanwhile, refused (stale_token) and kept in the audit log as
   * a late completion, which the reconciler flags.
   */
  async completeExecution(target: SettleTarget, result: { status: number; body: unknown }): Promise<SettleResult> {
    const call = await this.heldCall(target);
    const offered: StoredResult = { status: result.status, body: serialize(result.body), final: result.status >= 400 };
    const completedMs = this.now();
    const stored = await this.withinScopeLimit(call.scope, offered, call.ttlMs, completedMs);
    const t = performance.now();
    let done: Awaited<ReturnType<KeyStore["complete"]>>;
    try {
      done = await this.store.complete(call.scope, call.key, target.token, stored, call.ttlMs, completedMs);
    } catch (err) {
      throw new UnavailableError("key_store", err);
    }
    if (!done.ok) done = (await this.completeHeldAgain(call, stored, completedMs, done.current)) ?? done;
    call.storeMs += performance.now() - t;
    const durationMs = Math.max(0, completedMs - call.arrivedMs);
    if (done.ok) {
      this.held.delete(call.executionId);
      this.replayCache?.remember(done.record, completedMs);
      await this.settleWindow(call, { class: "done", stored });
      this.audit.outcome({
        id: call.executionId,
        outcome: stored.final ? "final_error" : "succeeded",
        finishedAt: new Date(completedMs),
        durationMs,
        resultStatus: stored.status,
        resultBody: stored.body,
        resultFinal: stored.final,
        expiresAt: new Date(completedMs + call.ttlMs),
        error: null,
      });
      this.onCall({ tool: call.tool.name, result: stored.final ? "final_error" : "executed", storeMs: call.storeMs, auditMs: call.auditMs });
      return { state: "done", status: stored.status, body: stored.body, replayed: false, expiresAtMs: done.record.expiresAtMs, executionId: call.executionId };
    }
    const current = done.current;
    if (current && current.executionId === call.executionId && current.status === "done" && current.result) {
      // this execution's result is stored (under this reservation, or under the one that held the
      // key again for it after a key-store loss): the same result sent again is answered as the first time
      // (a result stored as its scope's over-limit placeholder cannot be compared: the resend is answered with it)
      if (current.result.status === stored.status && (sameJson(current.result.body, offered.body) || isOverLimitResult(current.result.body))) {
        this.held.delete(call.executionId);
        return { state: "done", status: current.result.status, body: current.result.body, replayed: true, expiresAtMs: current.expiresAtMs, executionId: call.executionId };
      }
    }
    if (current && current.executionId === call.executionId && current.token === target.token) {
      this.held.delete(call.executionId);
      if (current.status === "done") throw new InvalidStateError("this execution was completed with another result; a stored result is never changed", current);
      throw new InvalidStateError(
        "this execution was reported as unknown: the key is held until the tool's status probe or an operator decides (resolve it with this result in the console)",
        current,
      );
    }
    // Released by an operator or taken over while the caller ran its side effect: the key is no
    // longer this reservation's. The result is kept in the log (a late completion, flagged).
    this.held.delete(call.executionId);
    this.audit.outcome({
      id: call.executionId,
      outcome: "late_completion",
      finishedAt: new Date(completedMs),
      durationMs,
      resultStatus: stored.status,
      resultBody: stored.body,
      resultFinal: stored.final,
      expiresAt: new Date(completedMs + call.ttlMs),
      error: "completion refused: the reservation was released or taken over while the caller ran its side effect",
    });
    this.onCall({ tool: call.tool.name, result: "executed", storeMs: call.storeMs, auditMs: call.auditMs });
    throw new StaleTokenError(
      call.executionId,
      "the key was released or taken over while this reservation's side effect ran; the result was not stored under the key but kept in the audit log as a late completion, which operators see flagged",
    );
  }

  /**
   * A settle whose reservation is no longer as its caller left it, though nobody decided about the
   * call: the key store lost it (a Redis flush or restart without persistence), or it holds the key
   * again from the audit log as unknown for this very execution (restored after such a loss, the
   * call having never reported an outcome). The caller's word, carried by this execution's own
   * token, is then what the key stands for. Never after a decision (an operator's, a probe's, a
   * takeover: the log then has an outcome for the call, or the key another execution) and never
   * for another execution's record. Returns the store's outcome, or null when this does not apply.
   */
  private async completeHeldAgain(call: CallContext, stored: StoredResult, completedMs: number, current: KeyRecord | null): Promise<CompleteOutcome | null> {
    if (current !== null && (current.executionId !== call.executionId || current.status !== "unknown")) return null;
    if (current === null) {
      const token = await this.holdAgain(call, completedMs);
      if (token === null) {
        // the same completion sent again while the first was still being answered (another process
        // may hold the key again for this execution meanwhile): answered from what that one left,
        // or asked to retry while it is storing; never "released or taken over"
        const now = await this.storeCall(() => this.store.get(call.scope, call.key));
        if (now === null || now.executionId !== call.executionId) return null;
        if (now.status === "inflight") throw new ConflictError(now);
        return { ok: false, reason: "stale_token", current: now };
      }
      const done = await this.storeCall(() => this.store.complete(call.scope, call.key, token, stored, call.ttlMs, completedMs, { executionId: call.executionId }));
      if (!done.ok) await this.store.abandon(call.scope, call.key, token).catch(() => {});
      return done.ok ? done : null;
    }
    if (!(await this.openInLog(call))) return null;
    const resolved = await this.storeCall(() => this.store.resolve(call.scope, call.key, stored, call.ttlMs, { nowMs: completedMs, token: current.token }));
    return resolved.ok && resolved.after ? { ok: true, record: resolved.after } : null;
  }

  /**
   * For a settle that found no record under its key: when the key store lost its data since the
   * call was reserved and the log still holds the call open, the key is reserved again for this
   * execution and the token returned (the caller stores what the call said under it); else null.
   */
  private async holdAgain(call: CallContext, nowMs: number): Promise<number | null> {
    if (!(await this.lostSinceReserved(call)) || !(await this.openInLog(call))) return null;
    const begun = await this.storeCall(() =>
      this.store.begin({
        scope: call.scope,
        key: call.key,
        tool: call.tool.name,
        fingerprint: call.fingerprint,
        leaseMs: call.tool.leaseMs,
        nowMs,
        fallback: call.fallback,
        session: call.session,
        executionId: call.executionId,
        takeoverStuck: false,
        retryUnknown: false,
      }),
    );
    if (begun.kind !== "reserved") return null;
    // read again under the reservation, which keeps decisions and new calls out: one may have come first
    const open = await this.openInLog(call).catch(async (err: unknown) => {
      await this.store.abandon(call.scope, call.key, begun.token).catch(() => {});
      throw err;
    });
    if (open) return begun.token;
    await this.store.abandon(call.scope, call.key, begun.token).catch(() => {});
    return null;
  }

  /**
   * Whether the key store lost its data where this call's key lives since the call was reserved: an
   * epoch newer than the reservation, or none (nothing held there now). Otherwise a record that is
   * gone was deleted by a decision (a release), which stands. Durable stores never lose one.
   */
  private async lostSinceReserved(call: CallContext): Promise<boolean> {
    if (!this.store.epochOf) return false;
    const epochMs = await this.storeCall(() => this.store.epochOf!(call.scope, call.key));
    return epochMs === null || epochMs > call.arrivedMs;
  }

  /** Whether the log still has this execution without an outcome: nobody, its caller included, has said how it ended. */
  private async openInLog(call: CallContext): Promise<boolean> {
    let row: ExecutionRow | null;
    try {
      row = await this.audit.execution(call.executionId);
    } catch (err) {
      throw new UnavailableError("audit_log", err);
    }
    return row !== null && row.outcome === null && row.token === call.token;
  }

  private async storeCall<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (err) {
      throw new UnavailableError("key_store", err);
    }
  }

  /**
   * A client-run call ended without a result: `not_run` is the caller's word that its side effect
   * did not happen (the key is freed and a retry runs); `unknown` that it cannot tell (the key is
   * held as unknown until a probe or an operator decides). The same release sent again is answered
   * as the first time.
   */
  async releaseExecution(target: SettleTarget, outcome: "not_run" | "unknown", note: string | null): Promise<SettleResult> {
    const call = await this.heldCall(target);
    const durationMs = Math.max(0, this.now() - call.arrivedMs);
    if (outcome === "not_run") {
      let freed: boolean;
      try {
        freed = await this.store.abandon(call.scope, call.key, target.token);
      } catch (err) {
        throw new UnavailableError("key_store", err);
      }
      if (freed) {
        this.held.delete(call.executionId);
        await this.settleWindow(call, { class: "not_run" });
        this.recordOutcome(call, "failed", durationMs, null, note ? `not run: ${note}` : "not run: the caller said its side effect did not happen");
        this.onCall({ tool: call.tool.name, result: "tool_failed", storeMs: call.storeMs, auditMs: call.auditMs });
        return { state: "released" };
      }
      // Not freed: settled already, released meanwhile, or released by this same call sent before.
      // Which one only the store and the log can say; a read that fails is no answer (503, retry).
      let current: KeyRecord | null;
      try {
        current = await this.store.get(call.scope, call.key);
      } catch (err) {
        throw new UnavailableError("key_store", err);
      }
      if (current && current.executionId === call.executionId && current.token === target.token) throw settledAlready(current);
      if (await this.releaseHeldAgain(call, current)) {
        this.held.delete(call.executionId);
        this.recordOutcome(call, "failed", durationMs, null, note ? `not run: ${note}` : "not run: the caller said its side effect did not happen");
        this.onCall({ tool: call.tool.name, result: "tool_failed", storeMs: call.storeMs, auditMs: call.auditMs });
        return { state: "released" };
      }
      let row: ExecutionRow | null;
      try {
        row = await this.audit.execution(call.executionId);
      } catch (err) {
        throw new UnavailableError("audit_log", err);
      }
      if (row?.outcome === "failed") return { state: "released" };
      throw new StaleTokenError(call.executionId, "the key was released or taken over meanwhile; nothing was changed");
    }
    const noteText = note ?? "the caller could not tell whether its side effect happened";
    let marked: Awaited<ReturnType<KeyStore["markUnknown"]>>;
    try {
      marked = await this.store.markUnknown(call.scope, call.key, target.token, noteText, this.now());
    } catch (err) {
      throw new UnavailableError("key_store", err);
    }
    if (marked.ok) {
      this.held.delete(call.executionId);
      await this.settleWindow(call, { class: "unknown", note: noteText });
      this.recordOutcome(call, "unknown", durationMs, null, noteText);
      this.onCall({ tool: call.tool.name, result: "outcome_unknown", storeMs: call.storeMs, auditMs: call.auditMs });
      return { state: "unknown" };
    }
    const current = marked.current;
    if (current && current.executionId === call.executionId && current.token === target.token) {
      if (current.status === "unknown") return { state: "unknown" };
      throw settledAlready(current);
    }
    if (await this.markHeldAgain(call, current, noteText)) {
      this.held.delete(call.executionId);
      this.recordOutcome(call, "unknown", durationMs, null, noteText);
      this.onCall({ tool: call.tool.name, result: "outcome_unknown", storeMs: call.storeMs, auditMs: call.auditMs });
      return { state: "unknown" };
    }
    throw new StaleTokenError(call.executionId, "the key was released or taken over meanwhile; nothing was changed");
  }

  /**
   * The caller's not_run for a reservation the key store lost, or holds again from the log as
   * unknown for this execution (see completeHeldAgain): the key is freed (a lost one is free
   * already). Whether it applied; never after a decision or for another execution's record.
   */
  private async releaseHeldAgain(call: CallContext, current: KeyRecord | null): Promise<boolean> {
    if (current === null) return (await this.lostSinceReserved(call)) && (await this.openInLog(call));
    if (current.executionId !== call.executionId || current.status !== "unknown" || !(await this.openInLog(call))) return false;
    const released = await this.storeCall(() => this.store.release(call.scope, call.key, { nowMs: this.now(), token: current.token }));
    return released.ok;
  }

  /**
   * The caller's unknown for a reservation the key store lost (held again as unknown for this
   * execution), or holds again from the log as unknown already: the log then says so too.
   */
  private async markHeldAgain(call: CallContext, current: KeyRecord | null, note: string): Promise<boolean> {
    if (current !== null) return current.executionId === call.executionId && current.status === "unknown" && (await this.openInLog(call));
    const token = await this.holdAgain(call, this.now());
    if (token === null) {
      // the same report sent again while the first was still being answered: as for a completion
      const now = await this.storeCall(() => this.store.get(call.scope, call.key));
      if (now === null || now.executionId !== call.executionId) return false;
      if (now.status === "inflight") throw new ConflictError(now);
      return now.status === "unknown";
    }
    const marked = await this.storeCall(() => this.store.markUnknown(call.scope, call.key, token, note, this.now(), { executionId: call.executionId }));
    if (!marked.ok) await this.store.abandon(call.scope, call.key, token).catch(() => {});
    return marked.ok;
  }

  /**
   * A client-run call is still running: its lease is extended by the tool's lease from now, up to
   * MAX_RESERVATION_MS after it was reserved (beyond, refused: complete or release it). Refused
   * (stale_token) once the key was released or taken over: the caller should stop and say so.
   */
  async heartbeatExecution(target: SettleTarget): Promise<SettleResult> {
    const call = await this.heldCall(target);
    const now = this.now();
    const cap = call.arrivedMs + MAX_RESERVATION_MS;
    if (now >= cap) {
      throw new InvalidStateError(`a reservation is held at most ${MAX_RESERVATION_MS / 3_600_000} h; this one was made at ${new Date(call.arrivedMs).toISOString()}: complete or release it`, null);
    }
    const leaseUntilMs = Math.min(now + call.tool.leaseMs, cap);
    let out: Awaited<ReturnType<KeyStore["extendLease"]>>;
    try {
      out = await this.store.extendLease(call.scope, call.key, target.token, leaseUntilMs);
    } catch (err) {
      throw new UnavailableError("key_store", err);
    }
    if (!out.ok) {
      const current = out.current;
      if (current && current.executionId === call.executionId && current.token === target.token) throw settledAlready(current);
      throw new StaleTokenError(call.executionId, "the key was released or taken over; stop the heartbeats (a result is kept only as a late completion)");
    }
    const window = call.window;
    if (window?.token != null) {
      // the window's lease goes with its key's: left behind, it turns stuck while its call still runs
      try {
        await this.store.extendLease(call.scope, window.key, window.token, leaseUntilMs);
      } catch (err) {
        throw new UnavailableError("key_store", err);
      }
    }
    try {
      // the log's orphan checks wait for the new lease too
      await this.audit.extendLease(call.executionId, new Date(leaseUntilMs));
    } catch (err) {
      throw new UnavailableError("audit_log", err);
    }
    return { state: "reserved", leaseUntilMs };
  }

  /**
   * The operator (or the tool's probe) says the side effect did not happen: the next call with the
   * key runs it. Stuck and unknown keys; a running one only with `force`.
   */
  async release(decision: OperatorDecision, restored = false): Promise<{ before: KeyRecord }> {
    const out = await this.store.release(decision.scope, decision.key, guardOf(decision, this.now()));
    if (out.ok) {
      // the execution ends here as far as the log is concerned; if the store later loses data, the
      // released execution no longer blocks the key
      if (out.before.executionId) await this.audit.closeOpenExecution(out.before.executionId, "released", decision.reason);
      return { before: out.before };
    }
    if (out.reason === "absent") {
      // The key store lost the record, but the audit log still holds the call open: held again
      // first, the decision then goes through the store like any other (once)
      const held = restored ? null : await this.restoredFor(decision);
      if (held) return this.release({ ...decision, token: held.token }, true);
      // a call within its lease is not held again (it may still complete): closed in the log only
      // (the key's latest execution however old, as recovery reads it)
      const prior = await this.audit.priorExecution(decision.scope, decision.key, new Date(0));
      // as for a record the store holds: a call still within its lease is released only with force
      if (prior && prior.outcome === null && prior.leaseUntil.getTime() > this.now() && !decision.force) {
        throw refusal("release", "running", recordFromPrior(decision.scope, decision.key, prior, false));
      }
      if (
        prior &&
        (prior.outcome === null || prior.outcome === "unknown") &&
        (decision.token === undefined || decision.token === prior.token) &&
        (await this.audit.closeOpenExecution(prior.id, "released", decision.reason))
      ) {
        return { before: recordFromPrior(decision.scope, decision.key, prior, false) };
      }
    }
    throw refusal("release", out.reason, out.current);
  }

  /**
   * For a decision about a key the store has no record of: the record held again from the log for
   * the call it names (restoreHeld), or null. A decision made about a given reservation (`token`:
   * the lost record's, as the log has it, or the restored one's) applies only to that call.
   */
  private async restoredFor(decision: OperatorDecision): Promise<KeyRecord | null> {
    const restored = await this.restoreFromLog(decision.scope, decision.key, this.now());
    if (!restored || restored.record.status !== "unknown") return null;
    const { record, prior } = restored;
    if (decision.token !== undefined && decision.token !== record.token && decision.token !== prior?.token) return null;
    return record;
  }

  /**
   * The operator (or the tool's probe) confirmed the side effect happened: the key is done with the
   * result they supply. Stuck and unknown keys; a running one only with `force`.
   */
  async resolve(decision: OperatorDecision & { result: unknown; status?: number; ttlMs: number }, restored = false): Promise<{ before: KeyRecord; after: KeyRecord | null }> {
    const stored: StoredResult = { status: decision.status ?? 200, body: serialize(decision.result), final: false };
    const out = await this.store.resolve(decision.scope, decision.key, stored, decision.ttlMs, guardOf(decision, this.now()));
    if (!out.ok && out.reason === "absent" && !restored) {
      // held again from the log first (see release)
      const held = await this.restoredFor(decision);
      if (held) return this.resolve({ ...decision, token: held.token }, true);
    }
    if (!out.ok) throw refusal("resolve", out.reason, out.current);
    if (out.before.executionId) {
      const expiresAt = new Date(out.after?.expiresAtMs ?? this.now() + decision.ttlMs);
      await this.audit.closeOpenExecution(out.before.executionId, "resolved", decision.reason, { ...stored, expiresAt });
    }
    return { before: out.before, after: out.after };
  }

  /**
   * A decision the key store carries already while the audit log still holds its call open (the
   * process that decided stopped in between): the execution is closed in the log as decided, so a
   * key-store loss restores the decision rather than the held call. Only an open or unknown
   * execution is changed; returns whether it was.
   */
  async recordDecided(executionId: string, outcome: "released" | "resolved", reason: string, result?: StoredResult & { expiresAt: Date }): Promise<boolean> {
    return this.audit.closeOpenExecution(executionId, outcome, reason, result);
  }
}

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

/** Keys a report of client replays reads from the store at once. */
const CLIENT_REPLAY_READS = 50;

/** The longest `Prefer: wait` honoured (RFC 7240 leaves the bound to the server). */
export const MAX_WAIT_MS = 60_000;

/** A waiting duplicate re-reads its key at least this often, in case a change notice was lost. */
const FALLBACK_POLL_MS = 1_000;

const DEFAULT_MAX_WAITERS = 1_000;
/** The share of a process' waiting slots one scope may hold by default. */
const SCOPE_WAITERS_SHARE = 0.25;

/** Reservations a process remembers for their settles; beyond, the oldest are read back from the audit log. */
const MAX_HELD_IN_MEMORY = 10_000;

function settledAlready(current: KeyRecord): InvalidStateError {
  return new InvalidStateError(
    current.status === "done"
      ? "this execution was completed already; its result is stored and replayed"
      : "this execution was reported as unknown: the key is held until the tool's status probe or an operator decides",
    current,
  );
}

interface CallContext {
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
  storeMs: number;
  auditMs: number;
  cached?: boolean;
  /** the arguments its execution keeps for operators (null: the tool keeps none, or a reservation read back from the log) */
  arguments?: KeptArguments | null;
  /** an advisory key's (tool, arguments) window: its fallback key, how long, and its reservation once held */
  window: { key: string; ttlMs: number; token: number | null } | null;
  /** a reservation handed to its caller: its intent goes to the database in every audit mode */
  durableIntent?: boolean;
  /** a reservation handed to its caller: its token */
  token?: number;
}

/** The most of a service's answer an unknown outcome keeps (as the kept arguments, 8 KiB). */
export const MAX_KEPT_ANSWER_BYTES = 8 * 1024;

/** A service's answer as an unknown outcome keeps it: its body cut to MAX_KEPT_ANSWER_BYTES (a cut body is not JSON any more). */
function keptAnswer(answer: { status: number; body: string } | undefined): { status: number; body: string } | null {
  if (!answer) return null;
  // for operators only (never replayed): secrets in it are not kept (lib/idempotency/redaction.ts)
  // (read whole when it may be whole JSON; a longer one is cut anyway, and read as text)
  answer = { status: answer.status, body: redactAnswerText(answer.body.length <= 1024 * 1024 ? answer.body : answer.body.slice(0, 4 * MAX_KEPT_ANSWER_BYTES)) };
  const cut = Buffer.byteLength(answer.body) <= MAX_KEPT_ANSWER_BYTES ? answer.body : Buffer.from(answer.body).subarray(0, MAX_KEPT_ANSWER_BYTES).toString("utf8").replace(/\uFFFD$/, "");
  // PostgreSQL refuses U+0000 in text (and in the batch's JSON): one such body would hold back every audit row behind it
  return { status: answer.status, body: cut.replace(/\u0000/g, "\uFFFD") };
}

function intentArguments(kept: KeptArguments | null | undefined): { arguments: string | null; argumentsKept: KeptArguments["kept"] | null } {
  return kept ? { arguments: kept.json, argumentsKept: kept.kept } : { arguments: null, argumentsKept: null };
}

/** How a tool call ended, sorted into the outcome classes (DESIGN.md). */
type Ended =
  | { class: "done"; stored: StoredResult; durationMs: number }
  | { class: "not_run"; message: string; upstreamStatus?: number; durationMs: number }
  /** note: for operators; publicNote: what the caller is told */
  | { class: "unknown"; note: string; publicNote: string; timedOut: boolean; durationMs: number; answer?: { status: number; body: string } | null }
  /** the handler abandoned the call as a crashed process would: nothing is written */
  | { class: "abandoned" };

/**
 * An execution that holds its key whatever became of the key store: its outcome was unknown, or it
 * never reported one and its lease has passed (one within its lease may still complete by itself).
 */
function heldOpen(prior: PriorExecution, nowMs: number): boolean {
  return prior.outcome === "unknown" || (prior.outcome === null && prior.leaseUntil.getTime() <= nowMs);
}

/** Why a key held again from the log is unknown, as its record says. */
function heldNote(prior: PriorExecution): string {
  if (prior.outcome === "unknown") return prior.error ?? "the outcome of its call was unknown";
  return `its call never reported an outcome before its lease ended at ${prior.leaseUntil.toISOString()}, and the key store lost its reservation`;
}

/**
 * An execution whose result the log keeps for replay at `nowMs`: succeeded, final_error,
 * late_completion (as the key's latest execution) or resolved, with its body, not expired.
 */
function keepsResult(prior: PriorExecution, nowMs: number): boolean {
  if (prior.outcome === null || prior.outcome === "unknown" || prior.outcome === "failed" || prior.outcome === "released" || prior.outcome === "retried") return false;
  return prior.resultBody !== null && prior.expiresAt !== null && prior.expiresAt.getTime() > nowMs;
}

/** The record a lost key would have, rebuilt from its execution in the audit log. */
function recordFromPrior(scope: string, key: string, prior: PriorExecution, fallback: boolean): KeyRecord {
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
