import type { StoredResult } from "./record";

/**
 * The bytes of stored results each scope (tenant) holds, counted as results are stored, in buckets
 * by the hour their records expire: a result counts until the end of the hour its record expires in,
 * without a scan and without a hook on expiry. A key store offers it (Redis: a hash per scope; SQL: a
 * table), next to the records it counts.
 */
export interface ResultBytesCounter {
  /** adds a stored result's bytes to its scope, until `expiresAtMs` */
  add(scope: string, bytes: number, expiresAtMs: number): Promise<void>;
  /** the bytes `scope` holds at `nowMs` */
  usage(scope: string, nowMs: number): Promise<number>;
  /** every scope's bytes at `nowMs` (the metric), scopes at zero left out */
  all(nowMs: number): Promise<Map<string, number>>;
}

export const HOUR_MS = 3_600_000;

/** The bucket a record expiring at `expiresAtMs` counts in: it counts while the bucket is ≥ now's. */
export const expiryBucket = (expiresAtMs: number): number => Math.ceil(expiresAtMs / HOUR_MS);
export const currentBucket = (nowMs: number): number => Math.ceil(nowMs / HOUR_MS);

export const DEFAULT_SCOPE_RESULT_BYTES = 1024 ** 3;

/** How long a scope's count read from the store is used, with this process's own additions on top. */
const USAGE_READ_EVERY_MS = 5_000;

/** The stored result of a completion over its scope's limit: what happened, without its body. */
export function overLimitResult(stored: StoredResult, bytes: number, limitBytes: number): StoredResult {
  return {
    status: stored.status,
    final: stored.final,
    body: JSON.stringify({
      idemgate: {
        resultOverTenantLimit: true,
        status: stored.status,
        resultBytes: bytes,
        scopeResultBytesLimit: limitBytes,
        note: `the result (${bytes} bytes) would have taken this tenant's stored results over their limit of ${limitBytes} bytes, so it is not kept; the call is done and is not run again`,
      },
    }),
  };
}

/** How every placeholder's body starts (the audit log's partial index executions_result_over_limit_idx matches it). */
export const OVER_LIMIT_PREFIX = '{"idemgate":{"resultOverTenantLimit":true';

/** Whether a stored body is the placeholder of a result over its scope's limit. */
export function isOverLimitResult(body: string | null | undefined): boolean {
  return typeof body === "string" && body.startsWith(OVER_LIMIT_PREFIX);
}

/**
 * The per-scope limit on stored result bytes. A completion that would take its scope over the limit
 * is stored as done with a placeholder ({@link overLimitResult}): the side effect happened, so the
 * key must never run again, but its body is not kept. A soft limit: each process reads a scope's
 * count at most every few seconds and adds its own completions on top, so completions racing in
 * several processes can pass it by what they store meanwhile.
 */
export class ScopeResultLimit {
  private readonly read = new Map<string, { bytes: number; atMs: number }>();
  /** additions sent to the store and not yet answered */
  private readonly adding = new Set<Promise<void>>();

  constructor(
    private readonly counter: ResultBytesCounter,
    readonly limitBytes: number,
  ) {}

  /** The result to store for a completion of `scope` at `nowMs`, counted against the limit. */
  async admit(scope: string, stored: StoredResult, ttlMs: number, nowMs: number): Promise<StoredResult> {
    const bytes = Buffer.byteLength(stored.body);
    const used = await this.usage(scope, nowMs);
    const kept = used + bytes > this.limitBytes ? overLimitResult(stored, bytes, this.limitBytes) : stored;
    const keptBytes = kept === stored ? bytes : Buffer.byteLength(kept.body);
    const entry = this.read.get(scope);
    if (entry) entry.bytes += keptBytes;
    // counted once stored or not: a completion refused (a stale token) is over-counted until it expires.
    // Not waited for: the completion it counts does not depend on it, and on Redis it goes out on the
    // store's connection ahead of the completion's script, so the two share one round trip instead of
    // taking two in turn (this process's own count above is already up to date). A failed addition
    // under-counts the scope until it is read again, as a limit that is soft anyway may.
    const added = this.counter.add(scope, keptBytes, nowMs + ttlMs).catch(() => {});
    this.adding.add(added);
    void added.finally(() => this.adding.delete(added));
    return kept;
  }

  /** Waits for the additions sent so far to be answered (tests and shutdown read the store's count after it). */
  async settled(): Promise<void> {
    await Promise.all([...this.adding]);
  }

  private async usage(scope: string, nowMs: number): Promise<number> {
    const entry = this.read.get(scope);
    if (entry && nowMs - entry.atMs < USAGE_READ_EVERY_MS && nowMs >= entry.atMs) return entry.bytes;
    const bytes = await this.counter.usage(scope, nowMs);
    this.read.set(scope, { bytes, atMs: nowMs });
    if (this.read.size > 10_000) this.read.delete(this.read.keys().next().value!);
    return bytes;
  }
}
