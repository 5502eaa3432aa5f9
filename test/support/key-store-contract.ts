import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BeginInput, KeyStore } from "@/lib/idempotency/key-store";
import { stateOf, type KeyState, type StoredResult } from "@/lib/idempotency/record";

/**
 * A BeginInput maker for store tests: the defaults below, then the test's own (read on every call,
 * so a scope that changes per test is picked up), then the call's overrides.
 */
export function beginInputs(defaults: () => Partial<BeginInput> & Pick<BeginInput, "scope" | "nowMs">) {
  return (over: Partial<BeginInput> = {}): BeginInput => ({
    key: "k1",
    tool: "payments.charge",
    fingerprint: "fp-a",
    leaseMs: 60_000,
    fallback: false,
    session: null,
    executionId: randomUUID(),
    takeoverStuck: false,
    retryUnknown: false,
    ...defaults(),
    ...over,
  });
}

export interface StoreUnderContract {
  store: KeyStore;
  /** closes `store` and `peer`, and removes what they wrote */
  cleanup: () => Promise<void>;
  /**
   * Another store on the same backend, standing in for another server process: another
   * RedisKeyStore on the same prefix, another SqlKeyStore on the same PostgreSQL database through
   * a pool of its own. Without it (PGlite: one process) `store` changes its own records.
   */
  peer?: KeyStore;
  /**
   * What `store` and `peer` still hold for waiters, in the store and on the backend (Redis:
   * subscribed change channels; PostgreSQL: waiters' advisory locks): 0 once no one waits.
   */
  listening?: () => Promise<number>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The behaviour every KeyStore implementation must have. Each store's test file calls this with a
 * factory that opens the store on a real server (or the embedded database) and cleans up after.
 */
export function describeKeyStoreContract(name: string, makeStore: () => Promise<StoreUnderContract>): void {
  describe(`KeyStore contract: ${name}`, () => {
    let store: KeyStore;
    let peer: KeyStore;
    let listening: (() => Promise<number>) | undefined;
    let cleanup: () => Promise<void>;
    // Every test works in a scope of its own, so tests never see each other's keys.
    let scope: string;
    const T0 = 1_800_000_000_000;
    const ok: StoredResult = { status: 200, body: '{"chargeId":"ch_1","amountCents":500}', final: false };

    beforeAll(async () => {
      const made = await makeStore();
      ({ store, cleanup, listening } = made);
      peer = made.peer ?? made.store;
    });
    afterAll(async () => {
      await cleanup?.();
    });

    const newScope = () => (scope = `t${randomUUID().slice(0, 8)}`);
    const input = beginInputs(() => ({ scope, nowMs: T0, leaseMs: 1_000, session: "s1" }));

    it("reserves an absent key with a fencing token", async () => {
      newScope();
      const out = await store.begin(input());
      expect(out.kind).toBe("reserved");
      if (out.kind !== "reserved") return;
      expect(out.token).toBeGreaterThan(0);
      expect(out.record).toMatchObject({ status: "inflight", leaseUntilMs: T0 + 1_000, tool: "payments.charge", session: "s1" });
      const got = await store.get(scope, "k1");
      expect(got?.token).toBe(out.token);
    });

    it("answers conflict while inflight, stuck after the lease, replay once done", async () => {
      newScope();
      const first = await store.begin(input());
      expect((await store.begin(input({ nowMs: T0 + 999 }))).kind).toBe("conflict");
      expect((await store.begin(input({ nowMs: T0 + 1_000 }))).kind).toBe("stuck");
      if (first.kind !== "reserved") throw new Error("not reserved");
      const done = await store.complete(scope, "k1", first.token, ok, 60_000, T0 + 500);
      expect(done.ok).toBe(true);
      const replay = await store.begin(input({ nowMs: T0 + 2_000 }));
      expect(replay.kind).toBe("replay");
      if (replay.kind === "replay") {
        expect(replay.record.result).toEqual(ok);
        expect(replay.record.expiresAtMs).toBe(T0 + 500 + 60_000);
      }
    });

    it("reports a mismatch when the key comes back with other arguments", async () => {
      newScope();
      const first = await store.begin(input());
      expect((await store.begin(input({ fingerprint: "fp-b" }))).kind).toBe("mismatch");
      if (first.kind !== "reserved") throw new Error("not reserved");
      await store.complete(scope, "k1", first.token, ok, 60_000, T0);
      expect((await store.begin(input({ fingerprint: "fp-b", nowMs: T0 + 10 }))).kind).toBe("mismatch");
    });

    it("runs an expired key as new, with a larger token", async () => {
      newScope();
      const first = await store.begin(input());
      if (first.kind !== "reserved") throw new Error("not reserved");
      await store.complete(scope, "k1", first.token, ok, 1_000, T0);
      expect((await store.begin(input({ nowMs: T0 + 999 }))).kind).toBe("replay");
      const again = await store.begin(input({ nowMs: T0 + 1_000, fingerprint: "fp-other" }));
      expect(again.kind).toBe("reserved");
      if (again.kind === "reserved") expect(again.token).toBeGreaterThan(first.token);
    });

    it("refuses a completion with a stale fencing token", async () => {
      newScope();
      const first = await store.begin(input());
      if (first.kind !== "reserved") throw new Error("not reserved");
      const released = await store.release(scope, "k1", { nowMs: T0, force: true });
      expect(released.ok).toBe(true);
      const second = await store.begin(input({ nowMs: T0 + 10 }));
      if (second.kind !== "reserved") throw new Error("not reserved");
      expect(second.token).toBeGreaterThan(first.token);
      const stale = await store.complete(scope, "k1", first.token, ok, 60_000, T0 + 20);
      expect(stale).toMatchObject({ ok: false, reason: "stale_token" });
      const fresh = await store.complete(scope, "k1", second.token, ok, 60_000, T0 + 20);
      expect(fresh.ok).toBe(true);
      const gone = await store.complete(scope, "nope", first.token, ok, 60_000, T0 + 20);
      expect(gone).toMatchObject({ ok: false, reason: "absent" });
    });

    it("lets a late holder complete its own stuck key when nobody took over", async () => {
      newScope();
      const first = await store.begin(input());
      if (first.kind !== "reserved") throw new Error("not reserved");
      const late = await store.complete(scope, "k1", first.token, ok, 60_000, T0 + 5_000);
      expect(late.ok).toBe(true);
    });

    it("lets its holder complete a stuck key long after the lease, after other callers were told it is stuck, from another store instance, keeping its execution", async () => {
      newScope();
      const first = await store.begin(input({ executionId: "ex-held" }));
      if (first.kind !== "reserved") throw new Error("not reserved");
      for (const nowMs of [T0 + 1_000, T0 + 60_000, T0 + 3_600_000]) expect((await peer.begin(input({ nowMs }))).kind).toBe("stuck");
      // only its own token; another one changes nothing
      expect(await peer.complete(scope, "k1", first.token + 1, ok, 60_000, T0 + 3_600_000)).toMatchObject({ ok: false, reason: "stale_token" });
      const late = await peer.complete(scope, "k1", first.token, ok, 60_000, T0 + 3_600_001);
      expect(late).toMatchObject({ ok: true, record: { status: "done", token: first.token, executionId: "ex-held", result: ok, expiresAtMs: T0 + 3_660_001 } });
      expect(await store.get(scope, "k1")).toMatchObject({ status: "done", executionId: "ex-held", leaseUntilMs: null });
      expect((await store.begin(input({ nowMs: T0 + 3_600_002 }))).kind).toBe("replay");
      // and sent again: refused, the record as it was (the engine answers it from the record)
      expect(await store.complete(scope, "k1", first.token, ok, 60_000, T0 + 3_600_003)).toMatchObject({ ok: false, current: { status: "done", executionId: "ex-held" } });
    });

    it("resolves, under its token, a record held as unknown for an earlier execution: done with that execution, no unknown outcome left", async () => {
      newScope();
      const r = await store.begin(input({ key: "again", executionId: "ex-restoring" }));
      if (r.kind !== "reserved") throw new Error("not reserved");
      await store.markUnknown(scope, "again", r.token, "held again from the log", T0 + 5, { executionId: "ex-lost" });
      expect(await peer.resolve(scope, "again", ok, 60_000, { nowMs: T0 + 10, token: r.token + 1 })).toMatchObject({ ok: false, reason: "changed" });
      const resolved = await peer.resolve(scope, "again", ok, 60_000, { nowMs: T0 + 10, token: r.token });
      expect(resolved).toMatchObject({ ok: true, after: { status: "done", token: r.token, executionId: "ex-lost", result: ok, outcomeNote: null, unknownAtMs: null } });
      expect(await store.get(scope, "again")).toMatchObject({ status: "done", executionId: "ex-lost", outcomeNote: null });
      // decided: a second resolve under the same token is refused
      expect(await store.resolve(scope, "again", ok, 60_000, { nowMs: T0 + 11, token: r.token })).toMatchObject({ ok: false, reason: "not_inflight" });
    });

    it("takes over a stuck key when the tool's policy says so", async () => {
      newScope();
      const first = await store.begin(input());
      if (first.kind !== "reserved") throw new Error("not reserved");
      const inflight = await store.begin(input({ nowMs: T0 + 10, takeoverStuck: true }));
      expect(inflight.kind).toBe("conflict");
      const taken = await store.begin(input({ nowMs: T0 + 1_500, takeoverStuck: true }));
      expect(taken.kind).toBe("reserved");
      if (taken.kind !== "reserved") return;
      expect(taken.takenOver?.token).toBe(first.token);
      expect(taken.token).toBeGreaterThan(first.token);
      expect((await store.complete(scope, "k1", first.token, ok, 60_000, T0 + 1_600)).ok).toBe(false);
    });

    it("gives a reservation back on abandon only to its holder", async () => {
      newScope();
      const first = await store.begin(input());
      if (first.kind !== "reserved") throw new Error("not reserved");
      expect(await store.abandon(scope, "k1", first.token + 1)).toBe(false);
      expect(await store.abandon(scope, "k1", first.token)).toBe(true);
      expect(await store.get(scope, "k1")).toBeNull();
      expect((await store.begin(input({ nowMs: T0 + 1 }))).kind).toBe("reserved");
    });

    it("marks an unknown outcome under the holder's token, and answers unknown to every later call", async () => {
      newScope();
      const first = await store.begin(input({ executionId: "exec-1" }));
      if (first.kind !== "reserved") throw new Error("not reserved");
      const marked = await store.markUnknown(scope, "k1", first.token, "timed out after 400 ms", T0 + 400);
      expect(marked.ok).toBe(true);
      if (!marked.ok) return;
      // an unknown record keeps its lease (when the call's lease ended) beside the unknown outcome
      expect(marked.record).toEqual({
        ...first.record,
        status: "unknown",
        outcomeNote: "timed out after 400 ms",
        unknownAtMs: T0 + 400,
        leaseUntilMs: T0 + 1_000,
      });
      expect(await store.get(scope, "k1")).toEqual(marked.record);
      expect(stateOf(marked.record, T0 + 500)).toBe("unknown");

      // held whatever the time: not stuck after the lease, and no stuck takeover applies
      for (const over of [{ nowMs: T0 + 500 }, { nowMs: T0 + 5_000 }, { nowMs: T0 + 5_000, takeoverStuck: true }]) {
        const again = await store.begin(input(over));
        expect(again.kind).toBe("unknown");
        if (again.kind === "unknown") expect(again.record).toEqual(marked.record);
      }
      // mismatch still wins over the state
      expect((await store.begin(input({ fingerprint: "fp-b", nowMs: T0 + 500 }))).kind).toBe("mismatch");
      expect((await store.begin(input({ fingerprint: "fp-b", nowMs: T0 + 500, retryUnknown: true }))).kind).toBe("mismatch");
      // its holder gave up on it: it can neither complete nor abandon it any more
      expect(await store.complete(scope, "k1", first.token, ok, 60_000, T0 + 600)).toMatchObject({ ok: false, reason: "stale_token" });
      expect(await store.abandon(scope, "k1", first.token)).toBe(false);
      expect(await store.markUnknown(scope, "k1", first.token, "again", T0 + 700)).toMatchObject({
        ok: false,
        reason: "stale_token",
        current: { status: "unknown", outcomeNote: "timed out after 400 ms" },
      });
    });

    it("extends the holder's lease under its token (a stuck record is inflight again), and refuses any other token", async () => {
      newScope();
      const first = await store.begin(input({ executionId: "exec-hb" }));
      if (first.kind !== "reserved") throw new Error("not reserved");
      const extended = await store.extendLease(scope, "k1", first.token, T0 + 3_000);
      expect(extended).toEqual({ ok: true, record: { ...first.record, leaseUntilMs: T0 + 3_000 } });
      expect(await store.get(scope, "k1")).toEqual({ ...first.record, leaseUntilMs: T0 + 3_000 });
      // past the original lease it is still running, not stuck, for every caller and every list
      expect((await store.begin(input({ nowMs: T0 + 2_000 }))).kind).toBe("conflict");
      expect((await store.list({ state: "inflight", limit: 10, nowMs: T0 + 2_000, scope })).items.map((r) => r.key)).toEqual(["k1"]);
      expect((await store.counts(T0 + 2_000, { scope })).stuck).toBe(0);
      // its lease passed: stuck, until its holder's heartbeat arrives
      expect((await store.begin(input({ nowMs: T0 + 3_500 }))).kind).toBe("stuck");
      expect((await store.extendLease(scope, "k1", first.token, T0 + 5_000)).ok).toBe(true);
      expect((await store.begin(input({ nowMs: T0 + 3_600 }))).kind).toBe("conflict");
      expect(await store.extendLease(scope, "k1", first.token + 1, T0 + 9_000)).toMatchObject({ ok: false, reason: "stale_token" });
      expect(await store.extendLease(scope, "nope", first.token, T0 + 9_000)).toEqual({ ok: false, reason: "absent", current: null });
      await store.complete(scope, "k1", first.token, ok, 60_000, T0 + 4_000);
      expect(await store.extendLease(scope, "k1", first.token, T0 + 9_000)).toMatchObject({ ok: false, reason: "stale_token", current: { status: "done" } });
    });

    it("refuses to mark unknown for a stale token, a done key or an absent key", async () => {
      newScope();
      const first = await store.begin(input());
      if (first.kind !== "reserved") throw new Error("not reserved");
      expect((await store.release(scope, "k1", { nowMs: T0, force: true })).ok).toBe(true);
      const second = await store.begin(input({ nowMs: T0 + 10 }));
      if (second.kind !== "reserved") throw new Error("not reserved");
      const stale = await store.markUnknown(scope, "k1", first.token, "the service answered 502", T0 + 20);
      expect(stale).toEqual({ ok: false, reason: "stale_token", current: second.record });
      expect(await store.markUnknown(scope, "nope", first.token, "x", T0 + 20)).toEqual({ ok: false, reason: "absent", current: null });
      await store.complete(scope, "k1", second.token, ok, 60_000, T0 + 30);
      expect(await store.markUnknown(scope, "k1", second.token, "x", T0 + 40)).toMatchObject({
        ok: false,
        reason: "stale_token",
        current: { status: "done", outcomeNote: null, unknownAtMs: null },
      });
    });

    it("retries an unknown or stuck key with the same arguments when asked to, with a larger token", async () => {
      newScope();
      const first = await store.begin(input({ key: "u" }));
      if (first.kind !== "reserved") throw new Error("not reserved");
      const marked = await store.markUnknown(scope, "u", first.token, "connection reset", T0 + 100);
      if (!marked.ok) throw new Error("not marked");
      const retry = await store.begin(input({ key: "u", nowMs: T0 + 200, retryUnknown: true, leaseMs: 5_000 }));
      expect(retry.kind).toBe("reserved");
      if (retry.kind !== "reserved") return;
      expect(retry.token).toBeGreaterThan(first.token);
      expect(retry.takenOver).toEqual(marked.record);
      expect(retry.record).toMatchObject({
        status: "inflight", token: retry.token, leaseUntilMs: T0 + 5_200, outcomeNote: null, unknownAtMs: null, result: null,
      });
      // the new holder is the only one that can finish it
      expect((await store.complete(scope, "u", first.token, ok, 60_000, T0 + 300)).ok).toBe(false);
      expect((await store.complete(scope, "u", retry.token, ok, 60_000, T0 + 300)).ok).toBe(true);

      // a stuck key too, but never one whose lease is still valid
      const stuck = await store.begin(input({ key: "s" }));
      if (stuck.kind !== "reserved") throw new Error("not reserved");
      expect((await store.begin(input({ key: "s", nowMs: T0 + 10, retryUnknown: true }))).kind).toBe("conflict");
      const taken = await store.begin(input({ key: "s", nowMs: T0 + 1_500, retryUnknown: true }));
      expect(taken.kind).toBe("reserved");
      if (taken.kind !== "reserved") return;
      expect(taken.token).toBeGreaterThan(stuck.token);
      expect(taken.takenOver).toEqual(stuck.record);
    });

    it("releases and resolves stuck and unknown keys, refuses done and absent ones", async () => {
      newScope();
      const a = await store.begin(input({ key: "a" }));
      await store.begin(input({ key: "b" }));
      if (a.kind !== "reserved") throw new Error("not reserved");
      await store.complete(scope, "a", a.token, ok, 60_000, T0);
      const at = { nowMs: T0 + 5_000 };
      expect(await store.release(scope, "a", at)).toMatchObject({ ok: false, reason: "not_inflight", current: { status: "done" } });
      expect(await store.resolve(scope, "a", ok, 60_000, at)).toMatchObject({ ok: false, reason: "not_inflight" });
      // expired is refused too, even when forced
      const late = { nowMs: T0 + 120_000, force: true };
      expect(await store.release(scope, "a", late)).toMatchObject({ ok: false, reason: "not_inflight" });
      expect(await store.release(scope, "zz", at)).toEqual({ ok: false, reason: "absent", current: null });
      expect(await store.resolve(scope, "zz", ok, 60_000, at)).toEqual({ ok: false, reason: "absent", current: null });

      // stuck (lease passed at T0 + 1_000)
      const manual: StoredResult = { status: 200, body: '{"resolved":true}', final: false };
      const resolved = await store.resolve(scope, "b", manual, 60_000, at);
      expect(resolved.ok).toBe(true);
      if (resolved.ok) {
        expect(resolved.before.status).toBe("inflight");
        expect(resolved.after).toMatchObject({ status: "done", expiresAtMs: T0 + 65_000, leaseUntilMs: null, completedAtMs: T0 + 5_000 });
      }
      const replay = await store.begin(input({ key: "b", nowMs: T0 + 6_000 }));
      expect(replay.kind).toBe("replay");
      if (replay.kind === "replay") expect(replay.record.result).toEqual(manual);

      // unknown, released within its former lease: the lease no longer matters
      const u = await store.begin(input({ key: "u" }));
      if (u.kind !== "reserved") throw new Error("not reserved");
      await store.markUnknown(scope, "u", u.token, "timed out after 400 ms", T0 + 400);
      const released = await store.release(scope, "u", { nowMs: T0 + 500 });
      expect(released).toMatchObject({ ok: true, before: { status: "unknown", outcomeNote: "timed out after 400 ms" }, after: null });
      expect(await store.get(scope, "u")).toBeNull();
      expect((await store.begin(input({ key: "u", nowMs: T0 + 600 }))).kind).toBe("reserved");

      // unknown, resolved: done with the operator's result, the unknown outcome gone
      const v = await store.begin(input({ key: "v" }));
      if (v.kind !== "reserved") throw new Error("not reserved");
      const marked = await store.markUnknown(scope, "v", v.token, "the service answered 502", T0 + 300);
      const out = await store.resolve(scope, "v", manual, 10_000, { nowMs: T0 + 500 });
      expect(out.ok).toBe(true);
      if (out.ok && marked.ok) {
        expect(out.before).toEqual(marked.record);
        expect(out.after).toEqual({
          ...marked.record,
          status: "done", leaseUntilMs: null, completedAtMs: T0 + 500, expiresAtMs: T0 + 10_500, result: manual,
          outcomeNote: null, unknownAtMs: null,
        });
      }
      expect(await store.resolve(scope, "v", manual, 10_000, { nowMs: T0 + 600, force: true })).toMatchObject({ ok: false, reason: "not_inflight" });
    });

    it("releases or resolves a running key only when forced", async () => {
      newScope();
      const r = await store.begin(input({ key: "r" }));
      if (r.kind !== "reserved") throw new Error("not reserved");
      const running = { nowMs: T0 + 999 };
      expect(await store.release(scope, "r", running)).toEqual({ ok: false, reason: "running", current: r.record });
      expect(await store.resolve(scope, "r", ok, 60_000, running)).toEqual({ ok: false, reason: "running", current: r.record });
      expect(await store.get(scope, "r")).toEqual(r.record);
      expect(await store.release(scope, "r", { ...running, force: false })).toMatchObject({ ok: false, reason: "running" });
      expect(await store.release(scope, "r", { ...running, force: true })).toEqual({ ok: true, before: r.record, after: null });
      expect(await store.get(scope, "r")).toBeNull();

      const s = await store.begin(input({ key: "s" }));
      if (s.kind !== "reserved") throw new Error("not reserved");
      const forced = await store.resolve(scope, "s", ok, 60_000, { nowMs: T0 + 10, force: true });
      expect(forced).toMatchObject({ ok: true, before: s.record, after: { status: "done", result: ok, expiresAtMs: T0 + 60_010 } });
      // the holder finds its reservation gone
      expect(await store.complete(scope, "s", s.token, ok, 60_000, T0 + 20)).toMatchObject({ ok: false, reason: "stale_token" });
      // at the lease's end it is stuck: no force needed
      const t = await store.begin(input({ key: "t" }));
      expect((await store.release(scope, "t", { nowMs: T0 + 1_000 })).ok).toBe(true);
      expect(t.kind).toBe("reserved");
    });

    it("marks a reservation unknown for an earlier execution when told which (an outcome restored from the log)", async () => {
      newScope();
      const r = await store.begin(input({ key: "restored", executionId: "ex-new" }));
      if (r.kind !== "reserved") throw new Error("not reserved");
      const marked = await store.markUnknown(scope, "restored", r.token, "the tool threw: reset", T0 + 5, { executionId: "ex-earlier\nwith % odd text" });
      expect(marked).toMatchObject({ ok: true, record: { status: "unknown", token: r.token, executionId: "ex-earlier\nwith % odd text" } });
      expect(await store.get(scope, "restored")).toMatchObject({ status: "unknown", executionId: "ex-earlier\nwith % odd text", outcomeNote: "the tool threw: reset" });
      // without it, the reserving call's
      const own = await store.begin(input({ key: "own", executionId: "ex-own" }));
      if (own.kind !== "reserved") throw new Error("not reserved");
      expect(await store.markUnknown(scope, "own", own.token, "timed out", T0 + 5)).toMatchObject({ ok: true, record: { executionId: "ex-own" } });
    });

    it("with a token, decides only about that reservation: a key another call took since is refused as changed", async () => {
      newScope();
      const first = await store.begin(input({ key: "c" }));
      if (first.kind !== "reserved") throw new Error("not reserved");
      await store.markUnknown(scope, "c", first.token, "timed out after 400 ms", T0 + 400);
      const now = { nowMs: T0 + 500 };
      // the first call's key is released (its tool said nothing happened), and a second call takes it
      expect((await store.release(scope, "c", { ...now, token: first.token })).ok).toBe(true);
      const second = await store.begin(input({ key: "c", nowMs: T0 + 600 }));
      if (second.kind !== "reserved") throw new Error("not reserved");
      expect(second.token).not.toBe(first.token);
      const held = await store.markUnknown(scope, "c", second.token, "the service answered 502", T0 + 700);
      if (!held.ok) throw new Error("not marked");

      // a late decision about the first call leaves the second one's key as it is, forced or not
      const later = { nowMs: T0 + 5_000, token: first.token };
      expect(await store.release(scope, "c", later)).toEqual({ ok: false, reason: "changed", current: held.record });
      expect(await store.release(scope, "c", { ...later, force: true })).toEqual({ ok: false, reason: "changed", current: held.record });
      expect(await store.resolve(scope, "c", ok, 60_000, later)).toEqual({ ok: false, reason: "changed", current: held.record });
      expect(await store.get(scope, "c")).toEqual(held.record);
      // a stuck reservation too
      const stuck = await store.begin(input({ key: "d" }));
      if (stuck.kind !== "reserved") throw new Error("not reserved");
      expect(await store.release(scope, "d", { nowMs: T0 + 5_000, token: stuck.token + 1 })).toMatchObject({ ok: false, reason: "changed" });
      expect(await store.get(scope, "d")).toEqual(stuck.record);

      // about the call holding it: decided; without a token: whichever holds the key, as before
      const resolved = await store.resolve(scope, "c", ok, 60_000, { nowMs: T0 + 5_000, token: second.token });
      expect(resolved).toMatchObject({ ok: true, before: held.record, after: { status: "done", token: second.token, result: ok } });
      expect((await store.release(scope, "d", { nowMs: T0 + 5_000 })).ok).toBe(true);
      // a done key is not_inflight whatever the token
      expect(await store.release(scope, "c", { nowMs: T0 + 6_000, token: first.token })).toMatchObject({ ok: false, reason: "not_inflight" });
    });

    it("stores a final error and replays it byte for byte", async () => {
      newScope();
      const declined: StoredResult = { status: 402, body: '{"type":"card_declined","detail":"ünïcode ✓"}', final: true };
      const r = await store.begin(input());
      if (r.kind !== "reserved") throw new Error("not reserved");
      await store.complete(scope, "k1", r.token, declined, 60_000, T0);
      const replay = await store.begin(input({ nowMs: T0 + 1 }));
      expect(replay.kind === "replay" && replay.record.result).toEqual(declined);
    });

    it("counts keys by state, overall and per tool", async () => {
      newScope();
      // two inflight, one stuck, two unknown, two done, one expired at T0 + 5_000
      await store.begin(input({ key: "i1", leaseMs: 60_000 }));
      await store.begin(input({ key: "i2", leaseMs: 60_000, tool: "email.send" }));
      await store.begin(input({ key: "s1", leaseMs: 1_000 }));
      for (const [key, tool, at] of [["u1", "payments.charge", T0 + 100], ["u2", "email.send", T0 + 200]] as const) {
        const r = await store.begin(input({ key, tool }));
        if (r.kind !== "reserved") throw new Error("not reserved");
        await store.markUnknown(scope, key, r.token, "timed out after 100 ms", at);
      }
      for (const [key, ttl] of [["d1", 60_000], ["d2", 60_000], ["e1", 1_000]] as const) {
        const r = await store.begin(input({ key }));
        if (r.kind !== "reserved") throw new Error("not reserved");
        await store.complete(scope, key, r.token, ok, ttl, T0);
      }
      const now = T0 + 5_000;
      const page = await store.list({ scope, limit: 50, nowMs: now });
      expect(page.items).toHaveLength(8);
      expect(await store.counts(now, { scope })).toEqual({ inflight: 2, stuck: 1, unknown: 2, done: 2, expired: 1 });
      const counts = await store.counts(now, { tool: "email.send" });
      expect(counts.inflight).toBeGreaterThanOrEqual(1);
      expect(counts.unknown).toBeGreaterThanOrEqual(1);
      const byState = async (state: KeyState) =>
        (await store.list({ scope, state, limit: 50, nowMs: now })).items.map((r) => r.key).sort();
      expect(await byState("inflight")).toEqual(["i1", "i2"]);
      expect(await byState("stuck")).toEqual(["s1"]);
      expect(await byState("unknown")).toEqual(["u1", "u2"]);
      expect(await byState("done")).toEqual(["d1", "d2"]);
      expect(await byState("expired")).toEqual(["e1"]);
      expect((await store.list({ scope, state: "inflight", tool: "email.send", limit: 50, nowMs: now })).items.map((r) => r.key)).toEqual(["i2"]);
      expect((await store.list({ scope, state: "unknown", tool: "email.send", limit: 50, nowMs: now })).items.map((r) => r.key)).toEqual(["u2"]);
      expect((await store.list({ scope, state: "unknown", prefix: "u1", limit: 50, nowMs: now })).items.map((r) => r.key)).toEqual(["u1"]);
      // an unknown list row carries its note and time (never the result)
      const unknown = await store.list({ scope, state: "unknown", limit: 50, nowMs: now });
      expect(unknown.items.map((r) => [r.key, r.status, r.outcomeNote, r.unknownAtMs])).toEqual([
        ["u2", "unknown", "timed out after 100 ms", T0 + 200],
        ["u1", "unknown", "timed out after 100 ms", T0 + 100],
      ]);
      expect(page.items.every((r) => r.result === null)).toBe(true);
    });

    it("pages unknown keys newest outcome first, exactly once each, even when times tie", async () => {
      newScope();
      const keys = Array.from({ length: 31 }, (_, i) => `u-${String(i).padStart(2, "0")}`);
      const reserved = await Promise.all(keys.map((key) => store.begin(input({ key, tool: "email.send" }))));
      // three groups of equal unknownAtMs, marked in an order unrelated to their creation
      await Promise.all(
        reserved.map((r, i) => {
          if (r.kind !== "reserved") throw new Error("not reserved");
          return store.markUnknown(scope, keys[i], r.token, "the service answered 503", T0 + 100 + (i % 3));
        }),
      );
      // newest outcome first; ties by key, descending
      const expected = [...keys].sort((a, b) => {
        const at = (k: string) => Number(k.slice(2)) % 3;
        return at(b) - at(a) || (a < b ? 1 : -1);
      });
      for (const query of [{ scope }, { scope, tool: "email.send" }, { scope, prefix: "u-" }]) {
        const seen: string[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const page = await store.list({ ...query, state: "unknown", limit: 4, cursor, nowMs: T0 + 1_000 });
          seen.push(...page.items.map((r) => r.key));
          cursor = page.nextCursor;
        } while (cursor && ++pages < 50);
        expect(seen, JSON.stringify(query)).toEqual(expected);
      }
    });

    it("counts match the lists across scopes", async () => {
      newScope();
      const now = T0 + 5_000;
      const before = await store.counts(now);
      await store.begin(input({ key: "c1", leaseMs: 60_000 }));
      await store.begin(input({ key: "c2", leaseMs: 10 }));
      const c3 = await store.begin(input({ key: "c3", leaseMs: 60_000 }));
      if (c3.kind !== "reserved") throw new Error("not reserved");
      await store.markUnknown(scope, "c3", c3.token, "timed out after 400 ms", T0 + 400);
      const after = await store.counts(now);
      expect(after.inflight - before.inflight).toBe(1);
      expect(after.stuck - before.stuck).toBe(1);
      expect(after.unknown - before.unknown).toBe(1);
    });

    it("pages newest first with a cursor, exactly once each, even when times tie", async () => {
      newScope();
      const keys = Array.from({ length: 57 }, (_, i) => `page-${String(i).padStart(3, "0")}`);
      // every record created in the same millisecond: the cursor must still be exact
      await Promise.all(keys.map((key) => store.begin(input({ key, leaseMs: 60_000 }))));
      await store.begin(input({ key: "newest", nowMs: T0 + 1, leaseMs: 60_000 }));
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await store.list({ scope, limit: 10, cursor, nowMs: T0 + 2 });
        seen.push(...page.items.map((r) => r.key));
        cursor = page.nextCursor;
        pages++;
      } while (cursor && pages < 20);
      expect(seen[0]).toBe("newest");
      expect(seen).toHaveLength(58);
      expect(new Set(seen).size).toBe(58);

      const inflight: string[] = [];
      cursor = null;
      do {
        const page = await store.list({ scope, state: "inflight", limit: 7, cursor, nowMs: T0 + 2 });
        inflight.push(...page.items.map((r) => r.key));
        cursor = page.nextCursor;
      } while (cursor);
      expect(new Set(inflight).size).toBe(58);
    });

    it("finds keys by prefix, including characters that are special in patterns", async () => {
      newScope();
      for (const key of ["order:1", "order:2", "order_%x", "orderly", "other"]) {
        await store.begin(input({ key, leaseMs: 60_000 }));
      }
      const find = async (prefix: string) =>
        (await store.list({ scope, prefix, limit: 50, nowMs: T0 })).items.map((r) => r.key).sort();
      expect(await find("order:")).toEqual(["order:1", "order:2"]);
      expect(await find("order_%")).toEqual(["order_%x"]);
      expect(await find("order")).toEqual(["order:1", "order:2", "order_%x", "orderly"]);
      expect(await find("zzz")).toEqual([]);
    });

    it("never shows one scope's key to another", async () => {
      const a = newScope();
      await store.begin(input({ key: "shared" }));
      const b = newScope();
      expect(await store.get(b, "shared")).toBeNull();
      const out = await store.begin(input({ key: "shared", fingerprint: "fp-z" }));
      expect(out.kind).toBe("reserved");
      expect((await store.list({ scope: a, limit: 10, nowMs: T0 })).items.map((r) => r.scope)).toEqual([a]);
    });

    it("purges records expired before the retention window, index entries included, never unknown ones", async () => {
      newScope();
      for (const [key, ttl] of [["old", 1_000], ["recent", 100_000]] as const) {
        const r = await store.begin(input({ key }));
        if (r.kind !== "reserved") throw new Error("not reserved");
        await store.complete(scope, key, r.token, ok, ttl, T0);
      }
      // unknown long before the cutoff: still held
      const held = await store.begin(input({ key: "held", nowMs: T0 - 10 }));
      if (held.kind !== "reserved") throw new Error("not reserved");
      await store.markUnknown(scope, "held", held.token, "timed out after 400 ms", T0 - 5);
      const purged = await store.purge(T0 + 50_000, 100);
      expect(purged).toBeGreaterThanOrEqual(1);
      expect(await store.get(scope, "old")).toBeNull();
      expect(await store.get(scope, "recent")).not.toBeNull();
      expect(await store.get(scope, "held")).toMatchObject({ status: "unknown", unknownAtMs: T0 - 5 });
      expect((await store.list({ scope, state: "unknown", limit: 10, nowMs: T0 + 60_000 })).items.map((r) => r.key)).toEqual(["held"]);
      expect((await store.counts(T0 + 60_000, { scope })).unknown).toBe(1);
      const listed = await store.list({ scope, limit: 10, nowMs: T0 + 60_000 });
      expect(listed.items.map((r) => r.key)).toEqual(["recent", "held"]);
      expect((await store.list({ scope, prefix: "old", limit: 10, nowMs: T0 })).items).toEqual([]);
    });

    it("reserves exactly once among 200 concurrent callers of one key", async () => {
      newScope();
      const outs = await Promise.all(
        Array.from({ length: 200 }, () => store.begin(input({ key: "race", leaseMs: 60_000 }))),
      );
      expect(outs.filter((o) => o.kind === "reserved")).toHaveLength(1);
      expect(outs.filter((o) => o.kind === "conflict")).toHaveLength(199);
    });

    it("reserves 200 distinct keys for 200 concurrent callers", async () => {
      newScope();
      const outs = await Promise.all(
        Array.from({ length: 200 }, (_, i) => store.begin(input({ key: `k-${i}`, leaseMs: 60_000 }))),
      );
      expect(outs.every((o) => o.kind === "reserved")).toBe(true);
      const tokens = new Set(outs.map((o) => (o.kind === "reserved" ? o.token : -1)));
      expect(tokens.size).toBe(200);
    });

    it("answers ping", async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });

    describe("waitForChange", () => {
      // Generous: a notice arrives within milliseconds; this bound only ends a wait nobody woke.
      const WAIT_MS = 5_000;

      /** Until `n` or more keys are listened for, then a moment for the waits' own reads to finish. */
      async function listeningFor(n: number): Promise<void> {
        if (listening) {
          for (let tries = 0; (await listening()) < n; tries++) {
            if (tries > 250) throw new Error(`still not listening for ${n} key(s)`);
            await sleep(20);
          }
        }
        // so that only a notice, not the read at the start of the wait, can see the change
        await sleep(listening ? 100 : 300);
      }

      /** Nothing left subscribed or locked once every wait has ended (unsubscribing may take a moment). */
      async function expectNothingListening(): Promise<void> {
        if (!listening) return;
        let left = await listening();
        for (let tries = 0; left > 0 && tries < 100; tries++) {
          await sleep(20);
          left = await listening();
        }
        expect(left).toBe(0);
      }

      async function reserve(key: string): Promise<number> {
        const r = await store.begin(input({ key }));
        if (r.kind !== "reserved") throw new Error(`expected reserved, got ${r.kind}`);
        return r.token;
      }

      const changes: [string, (key: string, token: number) => Promise<unknown>][] = [
        ["completes", async (key, token) => expect((await peer.complete(scope, key, token, ok, 60_000, T0 + 100)).ok).toBe(true)],
        ["marks unknown", async (key, token) => expect((await peer.markUnknown(scope, key, token, "timed out after 400 ms", T0 + 100)).ok).toBe(true)],
        ["abandons", async (key, token) => expect(await peer.abandon(scope, key, token)).toBe(true)],
        ["releases", async (key) => expect((await peer.release(scope, key, { nowMs: T0 + 100, force: true })).ok).toBe(true)],
        ["resolves", async (key) => expect((await peer.resolve(scope, key, ok, 60_000, { nowMs: T0 + 100, force: true })).ok).toBe(true)],
        // still inflight afterwards (under a new token): only the notice can tell the waiter
        ["takes over (stuck)", async (key) => expect((await peer.begin(input({ key, nowMs: T0 + 5_000, takeoverStuck: true }))).kind).toBe("reserved")],
      ];
      for (const [what, change] of changes) {
        it(`wakes a waiter on an inflight key when another store instance ${what} it`, async () => {
          newScope();
          const token = await reserve("w");
          const waiting = store.waitForChange(scope, "w", WAIT_MS);
          await listeningFor(1);
          await change("w", token);
          expect(await waiting).toBe(true);
          await expectNothingListening();
        });
      }

      it("wakes every waiter of a key, in both store instances", async () => {
        newScope();
        const token = await reserve("many");
        const waiting = [
          ...Array.from({ length: 40 }, () => store.waitForChange(scope, "many", WAIT_MS)),
          ...Array.from({ length: 40 }, () => peer.waitForChange(scope, "many", WAIT_MS)),
        ];
        await listeningFor(1);
        await peer.complete(scope, "many", token, ok, 60_000, T0 + 100);
        expect(await Promise.all(waiting)).toEqual(waiting.map(() => true));
        await expectNothingListening();
      });

      it("answers false after the timeout when the key does not change, even when another key does", async () => {
        newScope();
        await reserve("idle");
        const other = await reserve("busy");
        const waiting = store.waitForChange(scope, "idle", 600);
        await listeningFor(1);
        await peer.complete(scope, "busy", other, ok, 60_000, T0 + 100);
        expect(await waiting).toBe(false);
        expect(await store.waitForChange(scope, "idle", 50)).toBe(false);
        await expectNothingListening();
      });

      it("tells keys apart that differ only after pattern characters", async () => {
        newScope();
        const star = await reserve("order:*");
        const one = await reserve("order:1");
        await reserve("order:[1]");
        const waitStar = store.waitForChange(scope, "order:*", 800);
        const waitOne = store.waitForChange(scope, "order:1", WAIT_MS);
        const waitBracket = store.waitForChange(scope, "order:[1]", 800);
        await listeningFor(3);
        await peer.complete(scope, "order:1", one, ok, 60_000, T0 + 100);
        expect(await waitOne).toBe(true);
        expect(await waitStar).toBe(false);
        expect(await waitBracket).toBe(false);
        const again = store.waitForChange(scope, "order:*", WAIT_MS);
        await listeningFor(1);
        await peer.abandon(scope, "order:*", star);
        expect(await again).toBe(true);
        await expectNothingListening();
      });

      it("answers true at once for a key that is no longer inflight when the wait starts", async () => {
        newScope();
        const token = await reserve("d");
        await peer.complete(scope, "d", token, ok, 60_000, T0 + 100);
        // the caller saw it inflight; it changed before the wait began
        expect(await store.waitForChange(scope, "d", WAIT_MS)).toBe(true);
        expect(await store.waitForChange(scope, "never-there", WAIT_MS)).toBe(true);
        await expectNothingListening();
      });

      it("answers false when the signal aborts, and at once when it already has", async () => {
        newScope();
        await reserve("a");
        const controller = new AbortController();
        // longer than the test's own timeout: only the abort can end it in time
        const waiting = store.waitForChange(scope, "a", 120_000, controller.signal);
        await listeningFor(1);
        controller.abort();
        expect(await waiting).toBe(false);
        expect(await store.waitForChange(scope, "a", 120_000, AbortSignal.abort())).toBe(false);
        await expectNothingListening();
      });
    });
  });
}
