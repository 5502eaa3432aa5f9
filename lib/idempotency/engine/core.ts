import type { AuditWriter } from "../audit-port";
import { DuplicateRate } from "../duplicate-rate";
import { TooManyWaitersError, UnavailableError } from "../errors";
import type { KeyStore } from "../key-store";
import type { PausedTools } from "../paused-tools";
import type { ReplayCache } from "../replay-cache";
import type { ScopeResultLimit } from "../scope-result-limit";
import type { CallContext } from "./call";
import type { CallEvent, EngineOptions } from "./types";

/** What every phase of the engine works with: its ports, its clock, and what one process keeps in memory. */
export interface EngineCore {
  readonly store: KeyStore;
  readonly audit: AuditWriter;
  readonly now: () => number;
  readonly onCall: (event: CallEvent) => void;
  readonly replayCache: ReplayCache | null;
  readonly replayReads: "adaptive" | "always" | "never";
  readonly duplicateRate: DuplicateRate;
  readonly scopeResultLimit: ScopeResultLimit | null;
  /** the tools operators paused */
  readonly pausedTools: PausedTools | null;
  /** calls waiting out a running call with their key (`Prefer: wait`) */
  readonly waiting: WaitSlots;
  /** reservations handed to callers by this process, until settled */
  readonly held: HeldCalls;
  /** per store epoch: until when results from before it may be asked for */
  readonly recoveryEnds: Map<number, Promise<number | null>>;
}

export function engineCore(options: EngineOptions): EngineCore {
  const maxWaiters = options.maxWaiters ?? DEFAULT_MAX_WAITERS;
  const maxWaitersPerScope = Math.min(maxWaiters, options.maxWaitersPerScope ?? Math.max(1, Math.floor(maxWaiters * SCOPE_WAITERS_SHARE)));
  return {
    store: options.store,
    audit: options.audit,
    now: options.now ?? Date.now,
    onCall: options.onCall ?? (() => {}),
    replayCache: options.replayCache ?? null,
    replayReads: options.store.peekReplay ? (options.replayReads ?? "adaptive") : "never",
    duplicateRate: new DuplicateRate(),
    scopeResultLimit: options.scopeResultLimit ?? null,
    pausedTools: options.pausedTools ?? null,
    waiting: new WaitSlots(maxWaiters, maxWaitersPerScope),
    held: new HeldCalls(),
    recoveryEnds: new Map(),
  };
}

const DEFAULT_MAX_WAITERS = 1_000;
/** The share of a process' waiting slots one scope may hold by default. */
const SCOPE_WAITERS_SHARE = 0.25;

/**
 * The slots of calls held for `Prefer: wait`, each a held request and a timer. One tenant's waiters
 * may not take every slot: a scope holds at most its share, so the others can still wait while one
 * fills its own.
 */
export class WaitSlots {
  private total = 0;
  /** waiting calls per scope; a scope with none has no entry */
  private readonly ofScope = new Map<string, number>();

  constructor(
    private readonly max: number,
    private readonly maxPerScope: number,
  ) {}

  /** Takes a slot for a call of `scope`, or refuses it (503) when its scope's share or the process' slots are taken. */
  take(scope: string): void {
    const ofScope = this.ofScope.get(scope) ?? 0;
    if (ofScope >= this.maxPerScope) throw new TooManyWaitersError(this.maxPerScope, "scope");
    if (this.total >= this.max) throw new TooManyWaitersError(this.max, "process");
    this.total++;
    this.ofScope.set(scope, ofScope + 1);
  }

  give(scope: string): void {
    this.total--;
    const left = (this.ofScope.get(scope) ?? 1) - 1;
    if (left > 0) this.ofScope.set(scope, left);
    else this.ofScope.delete(scope);
  }

  /** Calls waiting now: in all, or of one scope. */
  count(scope?: string): number {
    return scope === undefined ? this.total : (this.ofScope.get(scope) ?? 0);
  }
}

/** Reservations a process remembers for their settles; beyond, the oldest are read back from the audit log. */
const MAX_HELD_IN_MEMORY = 10_000;

/** Reservations handed to callers by this process, by execution, until settled (a bounded memory, oldest out first). */
export class HeldCalls {
  private readonly calls = new Map<string, CallContext>();

  remember(call: CallContext): void {
    if (this.calls.size >= MAX_HELD_IN_MEMORY) this.calls.delete(this.calls.keys().next().value!);
    this.calls.set(call.executionId, call);
  }

  get(executionId: string): CallContext | undefined {
    return this.calls.get(executionId);
  }

  forget(executionId: string): void {
    this.calls.delete(executionId);
  }
}

/** A key-store step whose failure the caller is answered with (503 key_store): it may send the same request again. */
export async function storeCall<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    throw new UnavailableError("key_store", err);
  }
}

/** An audit-log read whose failure the caller is answered with (503 audit_log). */
export async function logCall<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    throw new UnavailableError("audit_log", err);
  }
}
