import { LRUCache } from "lru-cache";
import type { KeyRecord } from "./record";

export interface ReplayCacheOptions {
  /** records kept at most */
  maxEntries: number;
  /** bytes of results (and a per-record allowance) kept at most */
  maxBytes: number;
}

export const DEFAULT_REPLAY_CACHE: ReplayCacheOptions = { maxEntries: 10_000, maxBytes: 32 * 1024 * 1024 };

/** Per-record allowance for the fields besides the result body (strings, numbers, map entry). */
const RECORD_OVERHEAD_BYTES = 512;

/**
 * Done records this process has seen, so that their duplicates are answered without a key-store
 * round trip. Safe because a done record never changes before it expires: operators release and
 * resolve only inflight or stuck keys, a store purges only expired ones, and a record lost by the
 * store stands in the audit log with the same result. Expiry is judged by the engine's clock, the
 * one the store is told (`nowMs`), so a cached record stops answering exactly when the store's
 * would. Only records with a result are kept; everything else goes to the store.
 */
export class ReplayCache {
  private readonly records: LRUCache<string, KeyRecord>;

  constructor(options: ReplayCacheOptions = DEFAULT_REPLAY_CACHE) {
    if (!(options.maxEntries >= 1) || !(options.maxBytes >= 1)) {
      throw new Error("a replay cache needs room for at least one record; leave it out to turn it off");
    }
    this.records = new LRUCache<string, KeyRecord>({
      max: options.maxEntries,
      maxSize: options.maxBytes,
      sizeCalculation: (record) => RECORD_OVERHEAD_BYTES + (record.result?.body.length ?? 0) * 2,
    });
  }

  /** The done record of (scope, key) if it is cached and has not expired at `nowMs`. */
  get(scope: string, key: string, nowMs: number): KeyRecord | null {
    const id = cacheKey(scope, key);
    const record = this.records.get(id);
    if (record === undefined) return null;
    if (record.expiresAtMs === null || record.expiresAtMs <= nowMs) {
      this.records.delete(id);
      return null;
    }
    return record;
  }

  /** Keeps a done record with a result that has not expired at `nowMs`; ignores anything else. */
  remember(record: KeyRecord, nowMs: number): void {
    if (record.status !== "done" || record.result === null || record.expiresAtMs === null || record.expiresAtMs <= nowMs) return;
    this.records.set(cacheKey(record.scope, record.key), record);
  }

  get size(): number {
    return this.records.size;
  }

  clear(): void {
    this.records.clear();
  }
}

/** Scopes and keys never contain a newline (see lib/idempotency/key-rules.ts). */
function cacheKey(scope: string, key: string): string {
  return `${scope}\n${key}`;
}
