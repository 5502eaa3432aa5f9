/**
 * Leader/follower group commit. An item submitted while no write is under way is written at once,
 * alone: a lone caller waits for nothing but its own write. Items submitted while a write is under
 * way wait for it and then go out together, at most `maxBatch` to one write. Each submitter's
 * promise settles only when the write that carried its item has settled: resolved once that write
 * succeeded, rejected with its error when it failed. A write may also settle its items one by one
 * (an array of results in submission order), for failures that belong to single items.
 */
export class GroupCommit<T> {
  private queue: Waiting<T>[] = [];
  private writing = false;
  private writes = 0;
  private items = 0;

  constructor(
    private readonly write: (items: T[]) => Promise<ItemResults | void>,
    private readonly maxBatch: number,
  ) {
    if (!(maxBatch >= 1)) throw new RangeError(`maxBatch must be at least 1, got ${maxBatch}`);
  }

  /** Resolves when the item is written; the write starts before this returns when none is under way. */
  submit(item: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.writing) this.next();
    });
  }

  /** Writes issued and items they carried, since this started: items ÷ writes is the mean batch. */
  get stats(): { writes: number; items: number } {
    return { writes: this.writes, items: this.items };
  }

  /** Items waiting for the write under way to end. */
  get waiting(): number {
    return this.queue.length;
  }

  private next(): void {
    const batch = this.queue.splice(0, this.maxBatch);
    this.writing = batch.length > 0;
    if (!this.writing) return;
    this.writes++;
    this.items += batch.length;
    let written: Promise<ItemResults | void>;
    try {
      written = this.write(batch.map((w) => w.item));
    } catch (err) {
      written = Promise.reject(err);
    }
    written.then(
      (results) => {
        // the next batch goes out before this one's callers go on: they run after this callback
        this.next();
        batch.forEach((w, i) => {
          const result = results?.[i];
          if (result && result.status === "rejected") w.reject(result.reason);
          else w.resolve();
        });
      },
      (err: unknown) => {
        this.next();
        for (const w of batch) w.reject(err);
      },
    );
  }
}

/** One result per item, in the order the items were submitted. */
export type ItemResults = readonly PromiseSettledResult<unknown>[];

interface Waiting<T> {
  item: T;
  resolve: () => void;
  reject: (err: unknown) => void;
}
