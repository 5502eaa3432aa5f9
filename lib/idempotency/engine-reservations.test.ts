import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { problemAnswer } from "@/lib/http/problem";
import { useEngineFixture } from "@/test/support/engine-fixture";
import { STORE_KINDS } from "@/test/support/stores";
import { Engine, MAX_RESERVATION_MS, type SettleTarget } from "./engine";
import { ConflictError, ExecutionNotFoundError, InvalidStateError, StaleTokenError, StuckKeyError, UnavailableError, UnknownOutcomeKeyError } from "./errors";
import type { AuditWriter } from "./audit-port";
import { fingerprint } from "./fingerprint";
import type { KeyStore } from "./key-store";
import { fallbackKey } from "./key-rules";
import type { ToolPolicy } from "./tool";

// The engine's phases on their own, as the reservation API uses them for a tool that runs in its
// caller's process: reserve (steps 1 and 2 of the write order), then complete, release or
// heartbeat, each fenced by the reservation's token.

const ledger: ToolPolicy = {
  name: "ledger.record",
  kind: "write",
  ttlMs: 60_000,
  leaseMs: 5_000,
  stuckPolicy: "block",
  fallbackTtlMs: null,
  dedupes: false,
  runs: "client",
};
const policyOf = (name: string) => (name === ledger.name ? ledger : undefined);
const args = { account: "acct-1", amountCents: 500, currency: "EUR" };

/** ioredis's and pg's word for a connection that broke (lib/db/errors.ts reads it as such) */
const connectionLost = () => new Error("Connection is closed.");

/**
 * `target` whose method `name` fails as a broken connection would while `failing()` says so; every
 * other call goes to the real store or log.
 */
function failingWhen<T extends object>(target: T, name: keyof T, failing: () => boolean): T {
  return new Proxy(target, {
    get(t, prop, receiver) {
      const value = Reflect.get(t, prop, receiver);
      if (typeof value !== "function") return value;
      if (prop === name) return (...a: unknown[]) => (failing() ? Promise.reject(connectionLost()) : value.apply(t, a));
      return value.bind(t);
    },
  });
}

describe.each(STORE_KINDS)("reservations on the %s store", (kind) => {
  const t = useEngineFixture(kind, { startMs: 1_800_000_000_000, audit: { mode: "durable", flushIntervalMs: 5 } });
  const clock = t.clock;
  const scope = () => `s${randomUUID().slice(0, 8)}`;

  async function reserved(s: string, key: string, extra: Partial<Parameters<Engine["reserve"]>[1]> = {}) {
    const r = await t.engine.reserve(ledger, { scope: s, key, args, ...extra });
    if (r.kind !== "reserved") throw new Error(`not reserved: ${r.kind}`);
    return r;
  }
  const target = (s: string, r: { executionId: string; token: number }): SettleTarget => ({ scope: s, executionId: r.executionId, token: r.token, policyOf });

  it("writes the intent before answering, then stores the completion and replays it to every later reservation", async () => {
    const s = scope();
    const r = await reserved(s, "k1");
    expect(r.leaseUntilMs).toBe(clock.ms + ledger.leaseMs);
    // in the database, not only queued, when reserve resolves
    const row = await t.db.prisma.execution.findUnique({ where: { id: r.executionId } });
    expect(row).toMatchObject({ scope: s, key: "k1", tool: "ledger.record", token: BigInt(r.token), outcome: null });
    // a duplicate while it runs: conflict
    await expect(t.engine.reserve(ledger, { scope: s, key: "k1", args })).rejects.toBeInstanceOf(ConflictError);

    const done = await t.engine.completeExecution(target(s, r), { status: 200, body: { entryId: "e1" } });
    expect(done).toMatchObject({ state: "done", status: 200, body: '{"entryId":"e1"}', replayed: false });
    const replay = await t.engine.reserve(ledger, { scope: s, key: "k1", args });
    expect(replay).toMatchObject({ kind: "replayed", status: 200, body: '{"entryId":"e1"}' });
    await t.audit.flush();
    expect(await t.db.prisma.execution.findUnique({ where: { id: r.executionId } })).toMatchObject({ outcome: "succeeded", resultBody: '{"entryId":"e1"}' });
  });

  it("answers a completion sent again with the same result as the first time, and refuses another result", async () => {
    const s = scope();
    const r = await reserved(s, "twice");
    await t.engine.completeExecution(target(s, r), { status: 201, body: { n: 1 } });
    expect(await t.engine.completeExecution(target(s, r), { status: 201, body: { n: 1 } })).toMatchObject({ state: "done", replayed: true, status: 201 });
    await expect(t.engine.completeExecution(target(s, r), { status: 201, body: { n: 2 } })).rejects.toBeInstanceOf(InvalidStateError);
    // and from another process, which reads the reservation back from the audit log
    const other = new Engine({ store: t.store, audit: t.audit, now: clock.now });
    expect(await other.completeExecution(target(s, r), { status: 201, body: { n: 1 } })).toMatchObject({ replayed: true });
  });

  it("answers a completion sent again with the same JSON in another key order as the first time, with the body as first stored", async () => {
    const s = scope();
    const r = await reserved(s, "reordered");
    await t.engine.completeExecution(target(s, r), { status: 200, body: { entryId: "e1", amount: { cents: 500, currency: "EUR" }, tags: ["a", "b"] } });
    const again = await t.engine.completeExecution(target(s, r), { status: 200, body: { tags: ["a", "b"], amount: { currency: "EUR", cents: 500 }, entryId: "e1" } });
    expect(again).toMatchObject({ state: "done", replayed: true, body: '{"entryId":"e1","amount":{"cents":500,"currency":"EUR"},"tags":["a","b"]}' });
    // an array's order is part of the result
    await expect(t.engine.completeExecution(target(s, r), { status: 200, body: { entryId: "e1", amount: { cents: 500, currency: "EUR" }, tags: ["b", "a"] } })).rejects.toBeInstanceOf(
      InvalidStateError,
    );
  });

  it("stores a final error (4xx) as the result; not_run frees the key, unknown holds it", async () => {
    const s = scope();
    const declined = await reserved(s, "declined");
    expect(await t.engine.completeExecution(target(s, declined), { status: 402, body: { error: "card_declined" } })).toMatchObject({ status: 402 });
    expect(await t.engine.reserve(ledger, { scope: s, key: "declined", args })).toMatchObject({ kind: "replayed", status: 402 });

    const notRun = await reserved(s, "not-run");
    expect(await t.engine.releaseExecution(target(s, notRun), "not_run", "the SDK refused before sending")).toEqual({ state: "released" });
    expect(await t.engine.releaseExecution(target(s, notRun), "not_run", null)).toEqual({ state: "released" });
    const again = await reserved(s, "not-run");
    expect(again.token).toBeGreaterThan(notRun.token);

    const unknown = await reserved(s, "unknown");
    expect(await t.engine.releaseExecution(target(s, unknown), "unknown", "the SDK threw after sending")).toEqual({ state: "unknown" });
    expect(await t.engine.releaseExecution(target(s, unknown), "unknown", null)).toEqual({ state: "unknown" });
    await expect(t.engine.reserve(ledger, { scope: s, key: "unknown", args })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
    await expect(t.engine.completeExecution(target(s, unknown), { status: 200, body: {} })).rejects.toBeInstanceOf(InvalidStateError);
    await expect(t.engine.releaseExecution(target(s, unknown), "not_run", null)).rejects.toBeInstanceOf(InvalidStateError);
  });

  it("answers an unknown execution id and another scope's the same way, and refuses a wrong token changing nothing", async () => {
    const s = scope();
    const r = await reserved(s, "fenced");
    const other = new Engine({ store: t.store, audit: t.audit, now: clock.now });
    for (const engine of [t.engine, other]) {
      await expect(engine.completeExecution({ ...target(s, r), executionId: randomUUID() }, { status: 200, body: 1 })).rejects.toBeInstanceOf(ExecutionNotFoundError);
      await expect(engine.completeExecution({ ...target(s, r), scope: scope() }, { status: 200, body: 1 })).rejects.toBeInstanceOf(ExecutionNotFoundError);
      await expect(engine.heartbeatExecution({ ...target(s, r), token: r.token + 1 })).rejects.toBeInstanceOf(StaleTokenError);
      await expect(engine.completeExecution({ ...target(s, r), token: r.token + 1 }, { status: 200, body: 1 })).rejects.toBeInstanceOf(StaleTokenError);
    }
    expect(await t.store.get(s, "fenced")).toMatchObject({ status: "inflight", token: r.token });
    // a tool Idemgate runs is not the caller's to settle
    const charge: ToolPolicy = { ...ledger, name: "payments.charge", runs: undefined };
    const run = await other.reserve(charge, { scope: s, key: "server-run", args });
    if (run.kind !== "reserved") throw new Error("not reserved");
    await expect(
      new Engine({ store: t.store, audit: t.audit }).completeExecution({ scope: s, executionId: run.executionId, token: run.token, policyOf: () => charge }, { status: 200, body: 1 }),
    ).rejects.toBeInstanceOf(ExecutionNotFoundError);
  });

  it("refuses a completion after an operator released the key (stale_token), keeps it as a late completion, and refuses heartbeats", async () => {
    const s = scope();
    const r = await reserved(s, "released");
    clock.ms += ledger.leaseMs + 1;
    await t.engine.release({ scope: s, key: "released", actor: "op", reason: "looked stuck" });
    await expect(t.engine.completeExecution(target(s, r), { status: 200, body: { late: true } })).rejects.toBeInstanceOf(StaleTokenError);
    await expect(t.engine.heartbeatExecution(target(s, r))).rejects.toBeInstanceOf(StaleTokenError);
    await t.audit.flush();
    expect(await t.db.prisma.execution.findUnique({ where: { id: r.executionId } })).toMatchObject({ outcome: "late_completion", resultBody: '{"late":true}' });
    expect(await t.store.get(s, "released")).toBeNull();
  });

  it("extends the lease by heartbeats, in the store and the log, so a call three leases long is never stuck; without them it is", async () => {
    const s = scope();
    const r = await reserved(s, "long");
    for (let i = 0; i < 9; i++) {
      clock.ms += Math.floor(ledger.leaseMs / 3);
      const beat = await t.engine.heartbeatExecution(target(s, r));
      expect(beat).toEqual({ state: "reserved", leaseUntilMs: clock.ms + ledger.leaseMs });
      await expect(t.engine.reserve(ledger, { scope: s, key: "long", args })).rejects.toBeInstanceOf(ConflictError);
    }
    expect(await t.db.prisma.execution.findUnique({ where: { id: r.executionId } })).toMatchObject({ leaseUntil: new Date(clock.ms + ledger.leaseMs) });
    expect(await t.engine.completeExecution(target(s, r), { status: 200, body: "ok" })).toMatchObject({ state: "done" });

    const idle = await reserved(s, "idle");
    clock.ms += ledger.leaseMs;
    await expect(t.engine.reserve(ledger, { scope: s, key: "idle", args })).rejects.toBeInstanceOf(StuckKeyError);
    void idle;
  });

  it("refuses a heartbeat 24 h after the reservation, and never extends the lease past that", async () => {
    const s = scope();
    const r = await reserved(s, "day");
    clock.ms += MAX_RESERVATION_MS - 1_000;
    expect(await t.engine.heartbeatExecution(target(s, r))).toEqual({ state: "reserved", leaseUntilMs: r.leaseUntilMs - ledger.leaseMs + MAX_RESERVATION_MS });
    clock.ms += 1_000;
    await expect(t.engine.heartbeatExecution(target(s, r))).rejects.toBeInstanceOf(InvalidStateError);
  });

  it("holds a duplicate reservation with Prefer: wait until the first completes, then answers the result", async () => {
    const s = scope();
    const r = await reserved(s, "wait");
    const waiting = t.engine.reserve(ledger, { scope: s, key: "wait", args, waitMs: 5_000 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await t.engine.completeExecution(target(s, r), { status: 200, body: { waited: true } });
    expect(await waiting).toMatchObject({ kind: "replayed", body: '{"waited":true}' });
  });

  it("checks an advisory key by its arguments too: a fresh model key for the same arguments is a duplicate, settled with the first", async () => {
    const s = scope();
    const advisory = { ...ledger, fallbackTtlMs: 10_000 };
    const first = await t.engine.reserve(advisory, { scope: s, key: "model-1", args, keySource: "model" });
    if (first.kind !== "reserved") throw new Error("not reserved");
    await expect(t.engine.reserve(advisory, { scope: s, key: "model-2", args, keySource: "model" })).rejects.toBeInstanceOf(ConflictError);
    await t.engine.completeExecution({ ...target(s, first), policyOf: () => advisory }, { status: 200, body: { once: true } });
    expect(await t.engine.reserve(advisory, { scope: s, key: "model-3", args, keySource: "model" })).toMatchObject({ kind: "replayed", body: '{"once":true}' });
  });
  it("answers a release whose follow-up read fails 503 (unavailable), not stale_token, and changes nothing", async () => {
    const s = scope();
    // settled already: release not_run frees nothing, then reads the key to say why
    const done = await reserved(s, "settled");
    await t.engine.completeExecution(target(s, done), { status: 200, body: { ok: 1 } });
    let storeDown = true;
    const readsFail = new Engine({ store: failingWhen<KeyStore>(t.store, "get", () => storeDown), audit: t.audit, now: clock.now });
    const refused = await readsFail.releaseExecution(target(s, done), "not_run", null).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(UnavailableError);
    // what the reservation API answers with it: 503 unavailable, come back after Retry-After
    expect(problemAnswer(refused)).toMatchObject({ status: 503, headers: { "Retry-After": expect.any(String) } });
    expect(JSON.parse(problemAnswer(refused).body)).toMatchObject({ type: "/problems/unavailable" });
    expect(await t.store.get(s, "settled")).toMatchObject({ status: "done", token: done.token });
    storeDown = false;
    await expect(readsFail.releaseExecution(target(s, done), "not_run", null)).rejects.toBeInstanceOf(InvalidStateError);

    // released before by this same call: the log says so, unless it cannot be read
    const notRun = await reserved(s, "released-twice");
    expect(await t.engine.releaseExecution(target(s, notRun), "not_run", null)).toEqual({ state: "released" });
    await t.audit.flush();
    let reads = 0;
    // the first read rebuilds the reservation (another process), the second is the one after abandon
    const logDown = new Engine({ store: t.store, audit: failingWhen<AuditWriter>(t.audit, "execution", () => ++reads === 2), now: clock.now });
    await expect(logDown.releaseExecution(target(s, notRun), "not_run", null)).rejects.toBeInstanceOf(UnavailableError);
    expect(await t.store.get(s, "released-twice")).toBeNull();
    expect(await logDown.releaseExecution(target(s, notRun), "not_run", null)).toEqual({ state: "released" });
  });

  it("settles an advisory key's window from another process; a failed read of the window answers 503 and leaves both reservations as they were", async () => {
    const s = scope();
    const advisory = { ...ledger, fallbackTtlMs: 10_000 };
    const first = await t.engine.reserve(advisory, { scope: s, key: "model-a", args, keySource: "model" });
    if (first.kind !== "reserved") throw new Error("not reserved");
    const windowKey = fallbackKey(fingerprint(advisory.name, args));
    let storeDown = true;
    // another process: the reservation is read back from the log, the window from the store
    const other = new Engine({ store: failingWhen<KeyStore>(t.store, "get", () => storeDown), audit: t.audit, now: clock.now });
    const settle = { ...target(s, first), policyOf: () => advisory };
    await expect(other.completeExecution(settle, { status: 200, body: { once: true } })).rejects.toBeInstanceOf(UnavailableError);
    expect(await t.store.get(s, "model-a")).toMatchObject({ status: "inflight", token: first.token });
    expect(await t.store.get(s, windowKey)).toMatchObject({ status: "inflight", executionId: first.executionId });
    storeDown = false;
    expect(await other.completeExecution(settle, { status: 200, body: { once: true } })).toMatchObject({ state: "done", replayed: false });
    // the window holds the result too: an identical call under another fresh model key is its duplicate
    expect(await t.store.get(s, windowKey)).toMatchObject({ status: "done" });
    expect(await t.engine.reserve(advisory, { scope: s, key: "model-b", args, keySource: "model" })).toMatchObject({ kind: "replayed", body: '{"once":true}' });
  });
  it("answers a heartbeat whose advisory window cannot be extended 503, so the caller sends the next one", async () => {
    const s = scope();
    const advisory = { ...ledger, fallbackTtlMs: 10_000 };
    const first = await t.engine.reserve(advisory, { scope: s, key: "model-h", args, keySource: "model" });
    if (first.kind !== "reserved") throw new Error("not reserved");
    const windowKey = fallbackKey(fingerprint(advisory.name, args));
    let windowDown = true;
    const store = new Proxy(t.store, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (typeof value !== "function") return value;
        if (prop === "extendLease") return (sc: string, key: string, ...rest: [number, number]) => (windowDown && key === windowKey ? Promise.reject(connectionLost()) : target.extendLease(sc, key, ...rest));
        return value.bind(target);
      },
    });
    const other = new Engine({ store, audit: t.audit, now: clock.now });
    const beat = { ...target(s, first), policyOf: () => advisory };
    clock.ms += 1_000;
    await expect(other.heartbeatExecution(beat)).rejects.toBeInstanceOf(UnavailableError);
    windowDown = false;
    const extended = await other.heartbeatExecution(beat);
    expect(extended).toMatchObject({ state: "reserved" });
    expect(await t.store.get(s, windowKey)).toMatchObject({ status: "inflight", leaseUntilMs: (extended as { leaseUntilMs: number }).leaseUntilMs });
  });
  it("stores the completion of a call that went stuck and was not taken over, from another process too, and replays it", async () => {
    const s = scope();
    const r = await reserved(s, "stuck-late");
    clock.ms += ledger.leaseMs * 3;
    await expect(t.engine.reserve(ledger, { scope: s, key: "stuck-late", args })).rejects.toBeInstanceOf(StuckKeyError);
    // the caller's completion arrives after its lease (the gateway was restarting): another process reads the reservation back from the log
    const restarted = new Engine({ store: t.store, audit: t.audit, now: clock.now });
    expect(await restarted.completeExecution(target(s, r), { status: 200, body: { entryId: "late" } })).toMatchObject({ state: "done", replayed: false });
    expect(await restarted.completeExecution(target(s, r), { status: 200, body: { entryId: "late" } })).toMatchObject({ state: "done", replayed: true });
    expect(await t.engine.reserve(ledger, { scope: s, key: "stuck-late", args })).toMatchObject({ kind: "replayed", body: '{"entryId":"late"}' });
    await t.audit.flush();
    expect(await t.db.prisma.execution.findUnique({ where: { id: r.executionId } })).toMatchObject({ outcome: "succeeded", resultBody: '{"entryId":"late"}' });
    // a stuck call an operator released meanwhile is not stored: a late completion
    const released = await reserved(s, "stuck-released");
    clock.ms += ledger.leaseMs * 3;
    await t.engine.release({ scope: s, key: "stuck-released", actor: "op", reason: "looked stuck" });
    await expect(restarted.completeExecution(target(s, released), { status: 200, body: { entryId: "late" } })).rejects.toBeInstanceOf(StaleTokenError);
    expect(await t.store.get(s, "stuck-released")).toBeNull();
  });

  if (kind === "redis") {
    it("after a key-store loss, stores the completion of a call nobody decided about: its record lost, or held again from the log as unknown", async () => {
      const s = scope();
      const lost = await reserved(s, "lost");
      const restored = await reserved(s, "restored");
      const other = await reserved(s, "other-token");
      clock.ms += ledger.leaseMs * 3;
      await t.loseData!();
      // a retry held "restored" again from the log, as unknown for its execution
      await expect(t.engine.reserve(ledger, { scope: s, key: "restored", args })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
      expect(await t.store.get(s, "restored")).toMatchObject({ status: "unknown", executionId: restored.executionId });
      const restarted = new Engine({ store: t.store, audit: t.audit, now: clock.now });
      // only with the execution's own token
      await expect(restarted.completeExecution({ ...target(s, other), token: other.token + 7 }, { status: 200, body: 1 })).rejects.toBeInstanceOf(StaleTokenError);
      for (const [key, r] of [["lost", lost], ["restored", restored]] as const) {
        expect(await restarted.completeExecution(target(s, r), { status: 200, body: { key } })).toMatchObject({ state: "done", replayed: false });
        expect(await restarted.completeExecution(target(s, r), { status: 200, body: { key } })).toMatchObject({ state: "done", replayed: true });
        expect(await t.engine.reserve(ledger, { scope: s, key, args })).toMatchObject({ kind: "replayed", body: JSON.stringify({ key }) });
        expect(await t.store.get(s, key)).toMatchObject({ status: "done", executionId: r.executionId });
      }
      await t.audit.flush();
      expect(await t.db.prisma.execution.findUnique({ where: { id: restored.executionId } })).toMatchObject({ outcome: "succeeded" });
    });

    it("after a key-store loss, the same completion sent twice at once (a retry while the first is still answered) is stored once and answered as stored to both", async () => {
      const s = scope();
      const calls = await Promise.all(Array.from({ length: 5 }, (_, i) => reserved(s, `twice-${i}`)));
      clock.ms += ledger.leaseMs * 3;
      await t.loseData!();
      const one = new Engine({ store: t.store, audit: t.audit, now: clock.now });
      const two = new Engine({ store: t.store, audit: t.audit, now: clock.now });
      for (const [i, r] of calls.entries()) {
        const body = { entryId: `e-${i}` };
        const answers = await Promise.allSettled([one.completeExecution(target(s, r), { status: 200, body }), two.completeExecution(target(s, r), { status: 200, body })]);
        // stored by one; the other is told so, or asked to retry (never "released or taken over")
        for (const a of answers) {
          if (a.status === "rejected") expect(a.reason).toBeInstanceOf(ConflictError);
        }
        expect(answers.filter((a) => a.status === "fulfilled" && a.value.state === "done" && !a.value.replayed)).toHaveLength(1);
        expect(await two.completeExecution(target(s, r), { status: 200, body })).toMatchObject({ state: "done", replayed: true });
        expect(await t.store.get(s, `twice-${i}`)).toMatchObject({ status: "done", executionId: r.executionId });
      }
      await t.audit.flush();
      for (const r of calls) expect(await t.db.prisma.execution.findUnique({ where: { id: r.executionId } })).toMatchObject({ outcome: "succeeded" });
    });

    it("after a key-store loss, the same unknown sent twice at once is recorded once and answered as recorded to both", async () => {
      const s = scope();
      const calls = await Promise.all(Array.from({ length: 5 }, (_, i) => reserved(s, `unknown-twice-${i}`)));
      clock.ms += ledger.leaseMs * 3;
      await t.loseData!();
      const one = new Engine({ store: t.store, audit: t.audit, now: clock.now });
      const two = new Engine({ store: t.store, audit: t.audit, now: clock.now });
      for (const [i, r] of calls.entries()) {
        const answers = await Promise.allSettled([one.releaseExecution(target(s, r), "unknown", "the SDK threw"), two.releaseExecution(target(s, r), "unknown", "the SDK threw")]);
        for (const a of answers) {
          if (a.status === "rejected") expect(a.reason).toBeInstanceOf(ConflictError);
          else expect(a.value).toEqual({ state: "unknown" });
        }
        expect(await t.store.get(s, `unknown-twice-${i}`)).toMatchObject({ status: "unknown", executionId: r.executionId });
      }
    });

    it("after a key-store loss, never stores a completion against a decision: an operator's release or resolve, or the caller's own unknown", async () => {
      const s = scope();
      const released = await reserved(s, "released");
      const resolved = await reserved(s, "resolved");
      const unknown = await reserved(s, "unknown");
      expect(await t.engine.releaseExecution(target(s, unknown), "unknown", "the SDK threw")).toEqual({ state: "unknown" });
      clock.ms += ledger.leaseMs * 3;
      await t.audit.flush();
      await t.loseData!();
      await t.engine.release({ scope: s, key: "released", actor: "op", reason: "checked: not booked" });
      await t.engine.resolve({ scope: s, key: "resolved", actor: "op", reason: "checked: booked", result: { by: "operator" }, ttlMs: 60_000 });
      await expect(t.engine.reserve(ledger, { scope: s, key: "unknown", args })).rejects.toBeInstanceOf(UnknownOutcomeKeyError);
      const restarted = new Engine({ store: t.store, audit: t.audit, now: clock.now });
      await expect(restarted.completeExecution(target(s, released), { status: 200, body: { by: "caller" } })).rejects.toBeInstanceOf(StaleTokenError);
      expect(await t.store.get(s, "released")).toBeNull();
      await expect(restarted.completeExecution(target(s, resolved), { status: 200, body: { by: "caller" } })).rejects.toBeInstanceOf(StaleTokenError);
      expect(await t.store.get(s, "resolved")).toMatchObject({ status: "done", result: { body: '{"by":"operator"}' } });
      await expect(restarted.completeExecution(target(s, unknown), { status: 200, body: { by: "caller" } })).rejects.toThrow();
      expect(await t.store.get(s, "unknown")).toMatchObject({ status: "unknown" });
    });

    it("after a key-store loss, the caller's unknown or not_run for a call nobody decided about is recorded as for a record it had", async () => {
      const s = scope();
      const unknown = await reserved(s, "u");
      const notRun = await reserved(s, "n");
      clock.ms += ledger.leaseMs * 3;
      await t.loseData!();
      const restarted = new Engine({ store: t.store, audit: t.audit, now: clock.now });
      expect(await restarted.releaseExecution(target(s, unknown), "unknown", "the SDK threw")).toEqual({ state: "unknown" });
      expect(await t.store.get(s, "u")).toMatchObject({ status: "unknown", executionId: unknown.executionId });
      expect(await restarted.releaseExecution(target(s, notRun), "not_run", "refused before sending")).toEqual({ state: "released" });
      await t.audit.flush();
      expect(await t.db.prisma.execution.findUnique({ where: { id: notRun.executionId } })).toMatchObject({ outcome: "failed" });
      // freed: the retry runs
      expect(await t.engine.reserve(ledger, { scope: s, key: "n", args })).toMatchObject({ kind: "reserved" });
    });
  }
});
