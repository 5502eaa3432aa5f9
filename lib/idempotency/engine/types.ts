/** The engine's public shapes: what its callers send and get back (lib/idempotency/engine.ts re-exports them). */
import type { KeyStore } from "../key-store";
import type { PausedTools } from "../paused-tools";
import type { AuditWriter, SuppressionKind, Transport } from "../audit-port";
import type { KeyRecord } from "../record";
import type { ReplayCache } from "../replay-cache";
import type { ScopeResultLimit } from "../scope-result-limit";
import type { ToolPolicy } from "../tool";

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
