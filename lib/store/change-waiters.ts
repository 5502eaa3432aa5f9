/**
 * The callers of one store waiting for records to change (KeyStore.waitForChange), by record id.
 * A store's feed (Redis pub/sub, PostgreSQL LISTEN, an in-process emitter) calls `notify(id)` when
 * it hears of a change. While at least one caller waits on an id the store listens for it (one
 * `Watch`, shared by all its waiters); when the last one leaves the watch is stopped.
 *
 * A wait, in order: join the id's waiters (so a notice from now on is heard), wait until the watch
 * is listening, then ask the store once whether the record is still inflight; a record that is not
 * counts as changed (the caller saw it inflight, and the change may have happened before anyone
 * listened). Ends with true on a notice, false on the timeout or an abort; never rejects.
 */
export interface Watch {
  /** resolves once changes of the id are heard; a rejection just means none will be (wait out the timeout) */
  ready: Promise<void>;
  stop(): void;
}

interface Entry {
  waiters: Set<(changed: boolean) => void>;
  watch: Watch;
}

/** setTimeout's largest delay; a longer wait would fire at once */
const MAX_TIMER_MS = 2_147_483_647;

export class ChangeWaiters {
  private entries = new Map<string, Entry>();
  private closed = false;

  constructor(private readonly startWatch: (id: string) => Watch) {}

  wait(id: string, timeoutMs: number, signal: AbortSignal | undefined, stillInflight: () => Promise<boolean>): Promise<boolean> {
    if (this.closed || signal?.aborted || !(timeoutMs > 0)) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      let entry = this.entries.get(id);
      if (!entry) {
        const fresh: Entry = { waiters: new Set(), watch: this.safeWatch(id) };
        // a watch that failed is not shared with later waiters: the next one starts a new watch
        fresh.watch.ready.catch(() => {
          if (this.entries.get(id) === fresh) this.entries.delete(id);
        });
        this.entries.set(id, fresh);
        entry = fresh;
      }
      const own = entry;
      let done = false;
      const settle = (changed: boolean) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        own.waiters.delete(settle);
        if (own.waiters.size === 0) {
          // an entry forgotten by forgetWatches is no longer in the map; a newer one may be
          if (this.entries.get(id) === own) this.entries.delete(id);
          own.watch.stop();
        }
        resolve(changed);
      };
      const onAbort = () => settle(false);
      const timer = setTimeout(() => settle(false), Math.min(timeoutMs, MAX_TIMER_MS));
      signal?.addEventListener("abort", onAbort, { once: true });
      own.waiters.add(settle);
      own.watch.ready
        .then(() => (done ? true : stillInflight()))
        .then(
          (inflight) => {
            if (!inflight) settle(true);
          },
          () => {}, // not listening, or the store did not answer: wait out the timeout
        );
    });
  }

  /** Wakes every caller waiting on `id` (true). */
  notify(id: string): void {
    const entry = this.entries.get(id);
    if (!entry) return;
    for (const settle of [...entry.waiters]) settle(true);
  }

  /**
   * The feed lost what it listened with (a dropped connection): the current waiters keep waiting
   * until their timeouts, and the next wait on an id starts a new watch.
   */
  forgetWatches(): void {
    this.entries = new Map();
  }

  /** Ends every wait (false) and refuses new ones (false at once). */
  close(): void {
    this.closed = true;
    const entries = [...this.entries.values()];
    this.entries = new Map();
    for (const entry of entries) for (const settle of [...entry.waiters]) settle(false);
  }

  /** how many ids have waiters now (for tests and status) */
  get watching(): number {
    return this.entries.size;
  }

  private safeWatch(id: string): Watch {
    try {
      return this.startWatch(id);
    } catch (err) {
      return { ready: Promise.reject(err), stop() {} };
    }
  }
}
