// A guarded function's completion (or its release as unknown or not run) that could not be
// delivered — the gateway restarting, the network down — is what the caller's key will stand for:
// without it the key turns stuck and an operator must decide, without the result, a call whose
// result the caller holds. So it is sent again here, in the background, with the same token and
// backoff, for as long as the process lives (the gateway accepts a completion with the token of a
// call that went stuck but was not taken over), and a process exiting normally first tries to
// deliver what is left, for a bounded time (IdemgateClient's `flushOnExitMs`).
import { IdemgateApiError } from "./errors";
import { backoffMs, type RetryOptions } from "./retry";

/** A settle guard() could not deliver: its request, and what to do with the gateway's answer. */
export interface PendingSettle {
  tool: string;
  key: string;
  executionId: string;
  action: "complete" | "release";
  /** the request body, the reservation's token in it */
  body: string;
  /** the gateway took it (its answer) or refused it for good (the error); called once */
  settled(outcome: { answer: { status: number; body: unknown } } | { refused: unknown }): void;
  /** the process exits with it still undelivered (after the exit flush's bound); called at most once */
  abandoned(message: string): void;
}

/** One attempt to deliver a settle: the gateway's answer, or a rejection (IdemgateApiError). */
export type SendSettle = (settle: PendingSettle) => Promise<{ status: number; body: unknown }>;

/** Between background attempts: from half a second, doubling, to at most 30 s (with jitter). */
export const BACKGROUND_RETRY: RetryOptions = { maxAttempts: Number.POSITIVE_INFINITY, baseDelayMs: 500, maxDelayMs: 30_000, maxRetryAfterMs: 30_000 };
/** While a flush waits: attempts at most this far apart. */
const FLUSH_RETRY_MS = 1_000;

/**
 * Whether a settle that failed may get through later: no answer (a timeout, a refused or broken
 * connection), the gateway unavailable or failing, a conflict, or a proxy's error in front of it.
 * Anything else is the gateway's final word on it (stale_token, invalid_state, not found).
 */
export function deliverableLater(err: unknown): boolean {
  if (!(err instanceof IdemgateApiError)) return false;
  if (err.status === 0) return true;
  const code = err.code;
  if (code === "unavailable" || code === "internal" || code === "conflict") return true;
  return code === null && (err.status >= 500 || err.status === 408 || err.status === 429);
}

interface Entry {
  settle: PendingSettle;
  done: Promise<void>;
}

export class PendingSettles {
  private readonly entries = new Set<Entry>();
  private readonly wakers = new Set<() => void>();
  private flushing = 0;

  constructor(
    private readonly send: SendSettle,
    private readonly random: () => number,
  ) {}

  /** Settles not delivered yet. */
  get size(): number {
    return this.entries.size;
  }

  /** Sends `settle` again in the background until the gateway takes it or refuses it for good. */
  add(settle: PendingSettle): void {
    let finished!: () => void;
    const entry: Entry = { settle, done: new Promise<void>((resolve) => (finished = resolve)) };
    this.entries.add(entry);
    void this.deliver(entry).finally(() => {
      this.entries.delete(entry);
      finished();
    });
  }

  /**
   * Sends every pending settle now, and again (at most a second apart) until each is delivered or
   * refused, or `timeoutMs` has passed. Resolves with how many are still pending (they go on in
   * the background).
   */
  async flush(timeoutMs: number): Promise<number> {
    if (this.entries.size === 0) return 0;
    this.flushing++;
    for (const wake of [...this.wakers]) wake();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, timeoutMs))));
    try {
      await Promise.race([Promise.all([...this.entries].map((e) => e.done)), bound]);
    } finally {
      clearTimeout(timer);
      this.flushing--;
    }
    return this.entries.size;
  }

  /** Tells every settle still pending that the process exits without it. */
  abandonAll(message: string): void {
    for (const entry of this.entries) entry.settle.abandoned(message);
  }

  private async deliver(entry: Entry): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      await this.pause(backoffMs(attempt, BACKGROUND_RETRY, this.random));
      let answer: { status: number; body: unknown };
      try {
        answer = await this.send(entry.settle);
      } catch (err) {
        if (deliverableLater(err)) continue;
        entry.settle.settled({ refused: err });
        return;
      }
      entry.settle.settled({ answer });
      return;
    }
  }

  /**
   * Waits `ms` on a timer that never keeps the process alive by itself (the exit flush sends what
   * is left), unless a flush is waiting; a flush ends the wait at once.
   */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.wakers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, this.flushing > 0 ? Math.min(ms, FLUSH_RETRY_MS) : ms);
      if (this.flushing === 0) (timer as { unref?: () => void }).unref?.();
      this.wakers.add(wake);
    });
  }
}
