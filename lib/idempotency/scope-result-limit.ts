import type { StoredResult } from "./record";

/**
 * The bytes of stored results each scope (tenant) holds, counted as results are stored, in buckets
 * by the hour their records expire: a result counts until the end of the hour its record expires in,
 * without a scan and without a hook on expiry. A key store offers it (Redis: a hash per scope; SQL: a
 * table), next to the records it counts.
 */
export interface ResultBytesCounter {
  /**
   * Adds stored results' bytes to their scopes, each until the end of the hour `expiresAtMs` is in
   * ({@link expiryBucket}), in one exchange with the store.
   */
  add(additions: readonly ResultBytesAddition[]): Promise<void>;
  /** the bytes `scope` holds at `nowMs` */
  usage(scope: string, nowMs: number): Promise<number>;
  /** every scope's bytes at `nowMs` (the metric), scopes at zero left out */
  all(nowMs: number): Promise<Map<string, number>>;
}

export interface ResultBytesAddition {
  scope: string;
  bytes: number;
  expiresAtMs: number;
}

export const HOUR_MS = 3_600_000;

/** The bucket a record expiring at `expiresAtMs` counts in: it counts while the bucket is ≥ now's. */
export const expiryBucket = (expiresAtMs: number): number => Math.ceil(expiresAtMs / HOUR_MS);
export const currentBucket = (nowMs: number): number => Math.ceil(nowMs / HOUR_MS);

export const DEFAULT_SCOPE_RESULT_BYTES = 1024 ** 3;

/** How long a scope's count read from the store is used, with this process's own additions on top. */
const USAGE_READ_EVERY_MS = 5_000;

/**
 * How long this process gathers its completions' bytes before adding them to the store in one
 * exchange (a Redis pipeline, one SQL statement): a completion then costs the store no round trip
 * and no write of its own. Well inside USAGE_READ_EVERY_MS, so other processes' view of a scope is
 * as late as before. A crash loses what was gathered since the last addition (at most this long of
 * completions): the scope is under-counted until those results expire, as the soft limit allows.
 */
export const ADD_EVERY_MS = 200;
/** gathered (scope, hour) pairs that make an addition go out at once */
const ADD_AT_PAIRS = 1_000;

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
  /** bytes gathered since the last addition, by scope and expiry hour */
  private gathered = new Map<string, ResultBytesAddition>();
  private timer: NodeJS.Timeout | null = null;
  /** additions sent to the store and not yet answered */
  private readonly adding = new Set<Promise<void>>();

  constructor(
    private readonly counter: ResultBytesCounter,
    readonly limitBytes: number,
    private readonly addEveryMs = ADD_EVERY_MS,
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
    // Gathered, not sent: this process's own count above is already up to date, and the store gets
    // the gathered bytes of every completion in one addition (ADD_EVERY_MS).
    this.gather(scope, keptBytes, nowMs + ttlMs);
    return kept;
  }

  /** Sends what is gathered and waits for every addition sent so far (tests and shutdown read the store's count after it). */
  async settled(): Promise<void> {
    this.send();
    await Promise.all([...this.adding]);
  }

  private gather(scope: string, bytes: number, expiresAtMs: number): void {
    const pair = `${expiryBucket(expiresAtMs)} ${scope}`;
    const entry = this.gathered.get(pair);
    if (entry) entry.bytes += bytes;
    else this.gathered.set(pair, { scope, bytes, expiresAtMs });
    if (this.gathered.size >= ADD_AT_PAIRS) this.send();
    else if (this.timer === null) {
      this.timer = setTimeout(() => this.send(), this.addEveryMs);
      this.timer.unref();
    }
  }

  /** A failed addition under-counts its scopes until they are read again, as a limit that is soft anyway may. */
  private send(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.gathered.size === 0) return;
    const additions = [...this.gathered.values()];
    this.gathered = new Map();
    const added = this.counter.add(additions).catch(() => {});
    this.adding.add(added);
    void added.finally(() => this.adding.delete(added));
  }

  private async usage(scope: string, nowMs: number): Promise<number> {
    const entry = this.read.get(scope);
    if (entry && nowMs - entry.atMs < USAGE_READ_EVERY_MS && nowMs >= entry.atMs) return entry.bytes;
    // the store has not seen this process's completions still gathered: they count on top
    let bytes = await this.counter.usage(scope, nowMs);
    for (const pending of this.gathered.values()) if (pending.scope === scope && expiryBucket(pending.expiresAtMs) >= currentBucket(nowMs)) bytes += pending.bytes;
    this.read.set(scope, { bytes, atMs: nowMs });
    if (this.read.size > 10_000) this.read.delete(this.read.keys().next().value!);
    return bytes;
  }
}
