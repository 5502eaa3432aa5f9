import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BeginInput } from "@/lib/idempotency/key-store";
import { createTestPglite } from "@/test/support/databases";
import { SqlKeyStore } from "./sql-key-store";

// Embedded mode (PGlite, one process): a waiter hears a change through the in-process feed. Two
// store instances on one Database, as the gateway's runtime and any other store of the process.
// A change lands at a different point of the wait each time — in the same turn as the wait's own
// read, a few microtasks or event-loop turns later; a wait still open once the change's statement
// has answered (and a read after it) has missed the wake: the engine would have answered it from
// its fallback re-read. The count of those must be 0. No clock is read.

const T0 = 1_800_000_000_000;
const settled = () => new Promise((resolve) => setImmediate(resolve));
const microtasks = async (n: number) => {
  for (let i = 0; i < n; i++) await Promise.resolve();
};

describe("PGlite: a waiter in the same process is woken by every change, wherever it lands around the wait's read", () => {
  let pglite: Awaited<ReturnType<typeof createTestPglite>>;
  let store: SqlKeyStore;
  let peer: SqlKeyStore;
  beforeAll(async () => {
    pglite = await createTestPglite();
    store = new SqlKeyStore(pglite.db);
    peer = new SqlKeyStore(pglite.db);
  }, 60_000);
  afterAll(async () => {
    await store?.close();
    await peer?.close();
    await pglite?.drop();
  });

  const input = (scope: string, key: string): BeginInput => ({
    scope, key, tool: "payments.charge", fingerprint: "f", leaseMs: 30_000, nowMs: T0, fallback: false, session: null, executionId: randomUUID(), takeoverStuck: false, retryUnknown: false,
  });

  it("misses no wake over 60 changes landing from the same turn to several turns after the wait began", async () => {
    const scope = `wake-${randomUUID().slice(0, 8)}`;
    const delays = [
      async () => {},
      () => microtasks(1),
      () => microtasks(5),
      () => microtasks(20),
      settled,
      async () => { await settled(); await settled(); },
    ];
    let missed = 0;
    let woken = 0;
    for (let i = 0; i < 60; i++) {
      const key = `k${i}`;
      const begun = await store.begin(input(scope, key));
      if (begun.kind !== "reserved") throw new Error(`expected reserved, got ${begun.kind}`);
      const abort = new AbortController();
      // the caller saw the key inflight (begin answered), and now waits for it to change
      const waiting = store.waitForChange(scope, key, 120_000, abort.signal);
      await delays[i % delays.length]();
      const done = await peer.complete(scope, key, begun.token, { status: 200, body: "{}", final: true }, 60_000, T0 + 10);
      expect(done.ok).toBe(true);
      // a statement after the change and the wait's own read, and a turn for their answers
      await store.get(scope, key);
      await settled();
      abort.abort();
      if (await waiting) woken++;
      else missed++;
    }
    expect({ woken, missed }).toEqual({ woken: 60, missed: 0 });
    expect(store.watchedKeys).toBe(0);
  });
});
