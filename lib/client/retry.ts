export interface RetryOptions {
  /** requests per call, the first included (1: never retry); IdemgateClient says which answers are retried */
  maxAttempts: number;
  /** the first backoff; it doubles with every attempt */
  baseDelayMs: number;
  /** the longest backoff */
  maxDelayMs: number;
  /**
   * the longest wait a `Retry-After` may ask for (the gateway's conflict answer asks for 1 s; a
   * proxy or another server in front of it may ask for longer than a caller wants to wait)
   */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY: RetryOptions = { maxAttempts: 5, baseDelayMs: 200, maxDelayMs: 5_000, maxRetryAfterMs: 10_000 };

/**
 * Capped exponential backoff with "equal jitter": half the delay is fixed, half random, so racing
 * callers spread out but none retries at once. `attempt` is the attempt that just failed (1-based).
 */
export function backoffMs(attempt: number, retry: RetryOptions, random: () => number): number {
  const capped = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(capped / 2 + random() * (capped / 2));
}

/** `Retry-After` in milliseconds: delta-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfterMs(value: string | null, nowMs: number): number | null {
  if (value === null) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const dateMs = Date.parse(trimmed);
  return Number.isNaN(dateMs) ? null : Math.max(0, dateMs - nowMs);
}

/** How long to wait before the next attempt: the server's `Retry-After` (capped) or the backoff. */
export function retryDelayMs(attempt: number, retryAfterMs: number | null, retry: RetryOptions, random: () => number): number {
  if (retryAfterMs !== null) return Math.min(retryAfterMs, retry.maxRetryAfterMs);
  return backoffMs(attempt, retry, random);
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
