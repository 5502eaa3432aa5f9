// The Redis scripts against the state rules: random sequences of operations on a few keys — begin
// (with and without takeover and retry), complete, abandon, mark unknown, heartbeat, an operator's
// release and resolve (forced or not, about a given reservation or not), time passing over leases
// and TTLs, and the store losing its data — run on a real Redis and on MemoryKeyStore (the rules of
// lib/idempotency/transitions.ts and nothing else), which must answer every step alike and hold
// the same records. Fencing tokens differ by store (Redis draws them from its clock): they are
// compared as which reservation they name.
import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { KeyStore } from "@/lib/idempotency/key-store";
import type { KeyRecord, StoredResult } from "@/lib/idempotency/record";
import { deleteRedisPrefix } from "@/test/support/stores";
import { MemoryKeyStore } from "../memory/memory-key-store";
import { BUCKET_COUNT, bucketOf } from "./key-names";
import { RedisKeyStore } from "./redis-key-store";

const REDIS_URL = process.env.REDIS_TEST_URL ?? "redis://127.0.0.1:6379";
const T0 = 1_800_000_000_000;
const SCOPE = "prop";
const KEYS = ["a", "b"] as const;
/** a token no store hands out in a run: Redis' are its clock in µs, the memory store's count from 1 */
const NEVER_ISSUED = 999_999;
const RESULT: StoredResult = { status: 200, body: '{"charged":true}', final: false };

const key = fc.constantFrom(...KEYS);
/** how far the clock moves before the step: across leases (500, 1000, 3000 ms) and TTLs (500, 2000 ms), and onto their edges */
const dt = fc.constantFrom(0, 1, 300, 499, 500, 1_000, 2_500);
/** which reservation of the key a holder's call comes from */
const holder = fc.constantFrom("latest", "previous", "never");
const step = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant("begin" as const), key, dt,
      other: fc.boolean(), leaseMs: fc.constantFrom(500, 1_000, 3_000), takeoverStuck: fc.boolean(), retryUnknown: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("complete" as const), key, dt, holder, ttlMs: fc.constantFrom(500, 2_000) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("markUnknown" as const), key, dt, holder }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("extendLease" as const), key, dt, holder, extraMs: fc.constantFrom(0, 500, 2_000) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("abandon" as const), key, dt, holder }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constantFrom("release" as const, "resolve" as const), key, dt, force: fc.boolean(),
      about: fc.constantFrom("any", "latest", "previous", "never"),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("lose" as const), dt }) },
);
type Step = typeof step extends fc.Arbitrary<infer S> ? S : never;

/** One store under test and the tokens it handed out in this run, per key, in order. */
class Subject {
  readonly issued = new Map<string, number[]>(KEYS.map((k) => [k, []]));
  /** the last reservation's storeEpochMs (not compared: the memory store loses nothing by itself) */
  lastEpochMs: number | null = null;
  constructor(
    readonly store: KeyStore,
    readonly lose: () => Promise<void>,
  ) {}

  token(k: string, which: "latest" | "previous" | "never"): number {
    const tokens = this.issued.get(k)!;
    const at = which === "latest" ? tokens.length - 1 : which === "previous" ? tokens.length - 2 : -1;
    return at >= 0 ? tokens[at] : NEVER_ISSUED;
  }

  /** a token as the reservation it names: `a#0` is key a's first */
  name(token: number): string {
    for (const [k, tokens] of this.issued) if (tokens.includes(token)) return `${k}#${tokens.indexOf(token)}`;
    return token === NEVER_ISSUED ? "never issued" : `unexpected ${token}`;
  }

  record(r: KeyRecord | null): unknown {
    return r && { ...r, token: this.name(r.token) };
  }

  /** the step's answer, with every token named */
  async run(s: Step, nowMs: number): Promise<unknown> {
    const { store } = this;
    switch (s.op) {
      case "begin": {
        const out = await store.begin({
          scope: SCOPE, key: s.key, tool: "payments.charge", fingerprint: s.other ? "fp-other" : "fp", leaseMs: s.leaseMs, nowMs,
          fallback: false, session: "s1", executionId: `ex-${nowMs}-${s.key}`, takeoverStuck: s.takeoverStuck, retryUnknown: s.retryUnknown,
        });
        if (out.kind !== "reserved") return { kind: out.kind, record: this.record(out.record) };
        this.issued.get(s.key)!.push(out.token);
        this.lastEpochMs = out.storeEpochMs;
        return { kind: out.kind, record: this.record(out.record), takenOver: this.record(out.takenOver) };
      }
      case "complete":
      case "markUnknown":
      case "extendLease": {
        const token = this.token(s.key, s.holder);
        const out =
          s.op === "complete"
            ? await store.complete(SCOPE, s.key, token, RESULT, s.ttlMs, nowMs)
            : s.op === "markUnknown"
              ? await store.markUnknown(SCOPE, s.key, token, "timed out after 400 ms", nowMs)
              : await store.extendLease(SCOPE, s.key, token, nowMs + s.extraMs);
        return out.ok ? { ok: true, record: this.record(out.record) } : { ok: false, reason: out.reason, current: this.record(out.current) };
      }
      case "abandon":
        return store.abandon(SCOPE, s.key, this.token(s.key, s.holder));
      case "release":
      case "resolve": {
        const guard = { nowMs, force: s.force, ...(s.about === "any" ? {} : { token: this.token(s.key, s.about) }) };
        const out = s.op === "release" ? await store.release(SCOPE, s.key, guard) : await store.resolve(SCOPE, s.key, RESULT, 2_000, guard);
        return out.ok
          ? { ok: true, before: this.record(out.before), after: this.record(out.after) }
          : { ok: false, reason: out.reason, current: this.record(out.current) };
      }
      case "lose":
        await this.lose();
        return null;
    }
  }
}

let client: Redis;
const family = `idgprop-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  // fail, never skip, when Redis is not there
  client = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  client.on("error", () => {});
  await client.ping();
});
afterAll(async () => {
  await deleteRedisPrefix(family);
  client?.disconnect();
});

it("the Redis scripts answer every sequence of operations as the rules do", async () => {
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 24 }), async (steps) => {
      const prefix = `${family}-${run++}`;
      const memory = new MemoryKeyStore();
      const model = new Subject(memory, async () => memory.loseData());
      const redis = new Subject(new RedisKeyStore(client, { prefix }), () => deleteRedisPrefix(`{${prefix}:`));
      // what Redis says of each bucket's epoch (since when it holds data): set for every bucket on
      // the store's first begin, and by a reservation in a bucket that lost it
      const epochs = new Map<number, number>();
      let nowMs = T0;
      try {
        for (const [i, s] of steps.entries()) {
          nowMs += s.dt;
          if (s.op === "begin" && i === steps.findIndex((x) => x.op === "begin")) {
            for (let b = 0; b < BUCKET_COUNT; b++) epochs.set(b, nowMs);
          }
          if (s.op === "lose") epochs.clear();
          const [expected, got] = [await model.run(s, nowMs), await redis.run(s, nowMs)];
          expect(got, `step ${i}: ${JSON.stringify(s)}`).toEqual(expected);
          if (s.op === "begin" && (got as { kind: string }).kind === "reserved") {
            const bucket = bucketOf(SCOPE, s.key);
            if (!epochs.has(bucket)) epochs.set(bucket, nowMs);
            expect(redis.lastEpochMs, `step ${i}: the bucket's epoch`).toBe(epochs.get(bucket));
          }
          for (const k of KEYS) {
            expect(redis.record(await redis.store.get(SCOPE, k)), `step ${i}: key ${k} after it`).toEqual(model.record(await memory.get(SCOPE, k)));
          }
        }
      } finally {
        await deleteRedisPrefix(`{${prefix}:`);
      }
    }),
    // up to 24 steps of 3 to 4 Redis calls each per run: on a 2-core machine shared with other test
    // runs 60 runs took 6 s, and 100 took 23 s while it also built the app (as `npm test` does)
    { numRuns: 70 },
  );
}, 120_000);
