// Replays answered from the client's cache never reach the gateway, yet operators read every replay
// in the audit log (a replay answered to another session is a stale-suppression signal). So each
// hit is queued here and reported in the background: POST /api/v1/replays, in batches.

export interface ReplayReport {
  tool: string;
  key: string;
  executionId: string;
  /** the client's monotonic clock when the hit happened */
  hitMs: number;
  session?: string;
}

/** Sends one batch (body `{"replays":[…]}`); rejects when it could not be delivered. */
export type SendReports = (body: string, items: number) => Promise<void>;

/** A batch is sent this long after its first item was queued, or at once when it has BATCH_ITEMS. */
export const REPORT_INTERVAL_MS = 250;
export const BATCH_ITEMS = 100;
/** What one request carries at most (the gateway refuses more). */
const MAX_ITEMS_PER_REQUEST = 500;
const MAX_BODY_BYTES = 1024 * 1024;
/** A batch is sent at most this often before it is dropped (and counted), RETRY_DELAY_MS × attempt apart. */
const SEND_ATTEMPTS = 3;
const RETRY_DELAY_MS = 250;
/** Reports kept while the gateway cannot be reached; beyond, the oldest are dropped (and counted). */
const MAX_QUEUED = 50_000;

export class ReplayReporter {
  private queue: ReplayReport[] = [];
  private timer: ReturnType<typeof setTimeout> | null = null;
  private sending: Promise<void> | null = null;
  /** reports given up on: not delivered after the send's retries, or pushed out of a full queue */
  dropped = 0;

  constructor(
    private readonly send: SendReports,
    private readonly clock: () => number,
  ) {}

  add(report: ReplayReport): void {
    this.queue.push(report);
    if (this.queue.length > MAX_QUEUED) {
      this.dropped += this.queue.length - MAX_QUEUED;
      this.queue.splice(0, this.queue.length - MAX_QUEUED);
    }
    if (this.queue.length >= BATCH_ITEMS) this.kick();
    else if (this.timer === null) {
      this.timer = setTimeout(() => this.kick(), REPORT_INTERVAL_MS);
      // never the reason a process stays alive: close() or flush() sends what is left
      (this.timer as { unref?: () => void }).unref?.();
    }
  }

  get pending(): number {
    return this.queue.length;
  }

  /** Sends everything queued (and waits for a batch already on its way). */
  async flush(): Promise<void> {
    this.clearTimer();
    while (this.sending !== null || this.queue.length > 0) {
      if (this.sending !== null) await this.sending;
      else this.kick();
    }
  }

  private kick(): void {
    this.clearTimer();
    if (this.sending !== null || this.queue.length === 0) return;
    this.sending = this.drain().finally(() => {
      this.sending = null;
      if (this.queue.length >= BATCH_ITEMS) this.kick();
      else if (this.queue.length > 0 && this.timer === null) {
        this.timer = setTimeout(() => this.kick(), REPORT_INTERVAL_MS);
        (this.timer as { unref?: () => void }).unref?.();
      }
    });
  }

  private async drain(): Promise<void> {
    const items = this.queue.splice(0, MAX_ITEMS_PER_REQUEST);
    // keys are short (≤ 255 characters): only a pathological batch is split by size
    while (items.length > 1 && this.body(items).length > MAX_BODY_BYTES) this.queue.unshift(...items.splice(Math.ceil(items.length / 2)));
    for (let attempt = 1; ; attempt++) {
      try {
        // built again for every attempt: the ages are counted to when it is sent
        await this.send(this.body(items), items.length);
        return;
      } catch {
        if (attempt >= SEND_ATTEMPTS) {
          this.dropped += items.length;
          return;
        }
        await new Promise((resolve) => (setTimeout(resolve, RETRY_DELAY_MS * attempt) as { unref?: () => void }).unref?.());
      }
    }
  }

  private body(items: readonly ReplayReport[]): string {
    const now = this.clock();
    const replays = items.map((r) => ({
      tool: r.tool,
      key: r.key,
      executionId: r.executionId,
      ageMs: Math.max(0, Math.round(now - r.hitMs)),
      ...(r.session ? { session: r.session } : {}),
    }));
    return JSON.stringify({ replays });
  }

  private clearTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }
}
