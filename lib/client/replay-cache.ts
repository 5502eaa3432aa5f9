// The client's cache of done results, so that a replay is answered without a request: the same
// reasoning as the gateway's own replay cache (lib/idempotency/replay-cache.ts). A done record never
// changes before it expires (operators release and resolve only stuck, unknown or running keys), so
// the answer the gateway gave for a key and these exact arguments is the answer it would give again
// until then.

export interface ReplayCacheOptions {
  /** answers kept at most, least recently used out first (default 1,000) */
  maxEntries?: number;
}

export const DEFAULT_REPLAY_CACHE_ENTRIES = 1_000;

/** A done answer as the gateway gave it, with when it stops being served by the client's clock. */
export interface CachedReplay {
  status: number;
  /** the stored result as JSON text, parsed per hit so callers never share an object */
  body: string;
  executionId: string;
  /** monotonic milliseconds (the client's clock) after which this entry is not served */
  deadlineMs: number;
}

/**
 * The deadline an answer that expires in `expiresInMs` by the gateway's clock gets by this one:
 * now, plus what is left, less a margin (1%, at least 1 s) for the time the answer took to arrive
 * and for clocks that run at slightly different rates.
 */
export function replayDeadlineMs(nowMs: number, expiresInMs: number): number {
  return nowMs + expiresInMs - Math.max(1_000, expiresInMs / 100);
}

/** A small LRU over a Map (insertion order is recency order: a hit moves its entry to the end). */
export class ClientReplayCache {
  private readonly entries = new Map<string, CachedReplay>();
  private readonly maxEntries: number;

  constructor(options: ReplayCacheOptions = {}) {
    const max = options.maxEntries ?? DEFAULT_REPLAY_CACHE_ENTRIES;
    if (!Number.isInteger(max) || max < 1) throw new Error("replayCache.maxEntries must be a whole number of at least 1 (turn the cache off with replayCache: false)");
    this.maxEntries = max;
  }

  /** The entry of (tool, key, the arguments' JSON text as sent), unless absent or past its deadline at `nowMs`. */
  get(tool: string, key: string, argumentsText: string, nowMs: number): CachedReplay | null {
    const id = cacheKey(tool, key, argumentsText);
    const entry = this.entries.get(id);
    if (entry === undefined) return null;
    this.entries.delete(id);
    if (entry.deadlineMs <= nowMs) return null;
    this.entries.set(id, entry);
    return entry;
  }

  set(tool: string, key: string, argumentsText: string, entry: CachedReplay, nowMs: number): void {
    if (entry.deadlineMs <= nowMs) return;
    const id = cacheKey(tool, key, argumentsText);
    this.entries.delete(id);
    this.entries.set(id, entry);
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }

  get size(): number {
    return this.entries.size;
  }

  clear(): void {
    this.entries.clear();
  }
}

/** Keys are printable ASCII (no newline); a tool name holds none either. */
function cacheKey(tool: string, key: string, argumentsText: string): string {
  return `${tool}\n${key}\n${argumentsText}`;
}
