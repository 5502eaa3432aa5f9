import { PAUSED_RETRY_AFTER_SECONDS } from "@/lib/problems/problems";
import { IdemgateError, UnavailableError } from "./errors";
import type { KeyStore } from "./key-store";
import { stateOf, type KeyRecord } from "./record";
import type { ToolPolicy } from "./tool";

/**
 * Pausing a write tool (DESIGN.md § Runs and pausing a tool): while a tool is paused, a new first
 * execution of it is refused before anything is reserved, in every server process within a second.
 * Replays of done keys, and the answers a held key gives (in progress, stuck, unknown, other
 * arguments), go on: they run nothing.
 */
export interface ToolPause {
  tool: string;
  reason: string;
  /** who paused it; "configuration file" for a tool declared `paused: true` */
  actor: string;
  /** null for a tool declared paused in the configuration file */
  pausedAtMs: number | null;
  /** unread: the paused tools could not be read yet (PausedTools), so whether it is paused is not known */
  source: "operator" | "config" | "unread";
}

export { PAUSED_RETRY_AFTER_SECONDS };

/** Each process reads the paused tools this often, so a pause holds everywhere within a second. */
export const PAUSE_REFRESH_MS = 250;

/** A read of the paused tools that takes longer fails (and the next one is tried): a hung query must not stop the refreshes. */
export const PAUSE_LOAD_TIMEOUT_MS = 2_000;

export class ToolPausedError extends IdemgateError {
  readonly code = "tool_paused";
  readonly tool: string;
  readonly reason: string;
  constructor(readonly pause: ToolPause) {
    super(`${pause.tool} is paused by an operator: ${pause.reason}. Nothing ran and nothing was reserved; send the call again with the same key once the tool is resumed`);
    this.tool = pause.tool;
    this.reason = pause.reason;
    // the answer says which tool, why and since when (lib/http/problem.ts)
    this.problem = { members: { tool: pause.tool, reason: pause.reason, ...(pause.pausedAtMs !== null ? { pausedAt: new Date(pause.pausedAtMs).toISOString() } : {}) } };
  }
}

export const CONFIG_PAUSE_ACTOR = "configuration file";

/**
 * The paused tools as this process last read them, refreshed every PAUSE_REFRESH_MS from `load`
 * (the audit database), each read bounded by `loadTimeoutMs`. A failed read keeps the last answer:
 * the database being down is no reason to forget a pause. Before any read succeeded, once one
 * failed (the database did not answer when the process started), no tool is known not to be
 * paused: unread() says so, and new first executions are refused (503 unavailable) until a read
 * succeeds.
 */
export class PausedTools {
  private byTool = new Map<string, ToolPause>();
  private timer: ReturnType<typeof setInterval> | null = null;
  private refreshing: Promise<void> | null = null;
  /** a read failed and none has succeeded yet */
  private failedFirstRead = false;
  /** when the last read succeeded (epoch ms); null before the first */
  lastReadAtMs: number | null = null;

  constructor(
    private readonly load: () => Promise<ToolPause[]>,
    private readonly loadTimeoutMs = PAUSE_LOAD_TIMEOUT_MS,
  ) {}

  /** The pause of an operator-paused tool, as last read. */
  get(tool: string): ToolPause | null {
    return this.byTool.get(tool) ?? null;
  }

  /** While no read has succeeded after one failed: a tool's stand-in pause, which refuses its new calls as unavailable (refusalOf). */
  unread(tool: string): ToolPause | null {
    if (!this.failedFirstRead) return null;
    return { tool, reason: "the paused tools could not be read from the audit database yet", actor: "", pausedAtMs: null, source: "unread" };
  }

  list(): ToolPause[] {
    return [...this.byTool.values()].sort((a, b) => a.tool.localeCompare(b.tool));
  }

  /** Reads the paused tools now (calls arriving together share one read). */
  refresh(): Promise<void> {
    this.refreshing ??= this.loadInTime()
      .then(
        (pauses) => {
          this.byTool = new Map(pauses.map((p) => [p.tool, p]));
          this.lastReadAtMs = Date.now();
          this.failedFirstRead = false;
        },
        (err: unknown) => {
          if (this.lastReadAtMs === null) this.failedFirstRead = true;
          throw err;
        },
      )
      .finally(() => {
        this.refreshing = null;
      });
    return this.refreshing;
  }

  /** load(), or a failure once loadTimeoutMs passed (what a hung read answers later is dropped). */
  private loadInTime(): Promise<ToolPause[]> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the paused tools were not read within ${this.loadTimeoutMs} ms`)), this.loadTimeoutMs);
    });
    return Promise.race([Promise.resolve().then(this.load), timedOut]).finally(() => clearTimeout(timer));
  }

  start(intervalMs = PAUSE_REFRESH_MS): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.refresh().catch(() => {}), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

/**
 * A tool's pause: declared in the configuration file, or an operator's (null: not paused); or,
 * while the paused tools could not be read yet, a stand-in (source `unread`) that refuses its new
 * calls as unavailable.
 */
export function pauseOf(tool: ToolPolicy, paused: PausedTools | null): ToolPause | null {
  if (tool.paused) return { tool: tool.name, reason: "declared paused in the configuration file", actor: CONFIG_PAUSE_ACTOR, pausedAtMs: null, source: "config" };
  return paused?.get(tool.name) ?? paused?.unread(tool.name) ?? null;
}

/** What a call that would run a paused tool is answered: 503 tool_paused; or 503 unavailable (the audit database) while the paused tools are unread. */
export function refusalOf(pause: ToolPause): IdemgateError {
  if (pause.source === "unread") {
    return new UnavailableError("audit_log", null, `whether ${pause.tool} is paused could not be read from the audit database yet; nothing was run or reserved, retry with the same key`);
  }
  return new ToolPausedError(pause);
}

/** What a key answers while its tool is paused, read without reserving anything. */
export type PausedAnswer = { kind: "replay" | "mismatch" | "conflict" | "stuck" | "unknown"; record: KeyRecord };

/**
 * A call of a paused tool: the answer its key already has (a done key's result, other arguments, a
 * call in progress, stuck or unknown), read from the key store without reserving; or, when the key
 * would run (none, expired, or a held key the tool's policy would run again), ToolPausedError.
 */
export async function answerWhilePaused(
  store: Pick<KeyStore, "get">,
  call: { scope: string; key: string; fingerprint: string; arrivedMs: number; tool: ToolPolicy },
  pause: ToolPause,
): Promise<PausedAnswer> {
  const record = await store.get(call.scope, call.key).catch((err: unknown) => {
    throw new UnavailableError("key_store", err);
  });
  const state = record ? stateOf(record, call.arrivedMs) : "expired";
  if (!record || state === "expired") throw refusalOf(pause);
  if (state === "done") return { kind: record.fingerprint === call.fingerprint ? "replay" : "mismatch", record };
  if (record.fingerprint !== call.fingerprint) return { kind: "mismatch", record };
  if (state === "inflight") return { kind: "conflict", record };
  // a held key the tool's policy would take over or send again is a new execution: refused too
  if (state === "stuck") {
    if (call.tool.stuckPolicy === "takeover" || call.tool.dedupes) throw refusalOf(pause);
    return { kind: "stuck", record };
  }
  if (call.tool.dedupes) throw refusalOf(pause);
  return { kind: "unknown", record };
}
