import { describe, expect, it } from "vitest";
import { ChangeWaiters, type Watch } from "./change-waiters";

// The in-process feed (PGlite) is ready at once; a store's feed calls notify(id) on a change.
const listening = (): Watch => ({ ready: Promise.resolve(), stop() {} });
/** longer than any test: a wait ends only by a notice, its read, or the abort below */
const NO_TIMEOUT = 2 ** 31 - 1;
/** every pending promise callback and I/O callback of this turn has run */
const settled = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Waits on `id` while `change` lands at a given point; after that point and a turn of the event
 * loop, a wait still open has missed the change and would have been answered by the caller's
 * fallback re-read (the engine's FALLBACK_POLL_MS): aborted here, it answers false.
 */
async function waitAround(change: "before the wait" | "during its read" | "after its read", readsInflight: boolean) {
  const waiters = new ChangeWaiters(listening);
  const abort = new AbortController();
  let reads = 0;
  if (change === "before the wait") waiters.notify("k"); // nobody listens yet: only the read can tell
  const waiting = waiters.wait("k", NO_TIMEOUT, abort.signal, async () => {
    reads++;
    // the read saw the record as it was; the change lands while its answer is on the way back
    if (change === "during its read") waiters.notify("k");
    return readsInflight;
  });
  await settled();
  if (change === "after its read") waiters.notify("k");
  await settled();
  abort.abort();
  return { changed: await waiting, reads, watching: waiters.watching };
}

describe("ChangeWaiters: a change is never missed, wherever it lands around the wait's own read", () => {
  it("a change before the wait: the read finds the record no longer inflight", async () => {
    expect(await waitAround("before the wait", false)).toEqual({ changed: true, reads: 1, watching: 0 });
  });

  it("a change while the read is on its way (the read still saw it inflight): heard, because the wait joined before it read", async () => {
    expect(await waitAround("during its read", true)).toEqual({ changed: true, reads: 1, watching: 0 });
  });

  it("a change after the read: heard", async () => {
    expect(await waitAround("after its read", true)).toEqual({ changed: true, reads: 1, watching: 0 });
  });

  it("no change: the wait stays open (until its timeout or, here, the abort)", async () => {
    const waiters = new ChangeWaiters(listening);
    const abort = new AbortController();
    const waiting = waiters.wait("k", NO_TIMEOUT, abort.signal, async () => true);
    await settled();
    waiters.notify("other key");
    await settled();
    expect(waiters.watching).toBe(1);
    abort.abort();
    expect(await waiting).toBe(false);
    expect(waiters.watching).toBe(0);
  });

  it("a second waiter joining a key already watched hears a change made during its own read", async () => {
    const waiters = new ChangeWaiters(listening);
    const abort = new AbortController();
    const first = waiters.wait("k", NO_TIMEOUT, abort.signal, async () => true);
    await settled();
    const second = waiters.wait("k", NO_TIMEOUT, abort.signal, async () => {
      waiters.notify("k");
      return true;
    });
    await settled();
    abort.abort();
    expect(await Promise.all([first, second])).toEqual([true, true]);
  });
});
