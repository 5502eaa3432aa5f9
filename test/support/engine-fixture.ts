import { afterAll, beforeAll } from "vitest";
import type { Database } from "@/lib/db/database";
import { PrismaAuditWriter, type AuditWriterOptions } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import type { KeyStore } from "@/lib/idempotency/key-store";
import type { RunTool } from "@/lib/idempotency/tool";
import { openTestStore, type StoreKind, type StoreUnderTest } from "./stores";

/** A clock the test moves by hand: `clock.ms += leaseMs` lets a lease pass without waiting. */
export class FakeClock {
  constructor(public ms: number) {}
  /** for `new Engine({ now: clock.now })` */
  readonly now = (): number => this.ms;
}

export interface EngineFixtureOptions {
  /** the audit writer's options (default: durable, written every 5 ms) */
  audit?: AuditWriterOptions;
  /** where the fake clock starts (default: the wall clock when the file is loaded) */
  startMs?: number;
  /** the engine's clock, when it is not the fake one (e.g. one that follows the wall clock) */
  now?: () => number;
  /** how long opening the store may take (PostgreSQL and PGlite create a database) */
  setupTimeoutMs?: number;
}

export interface EngineFixture {
  readonly store: KeyStore;
  readonly db: Database;
  /** Redis only: every key of this store gone, as after a flush */
  readonly loseData: StoreUnderTest["loseData"];
  readonly audit: PrismaAuditWriter;
  readonly engine: Engine;
  readonly clock: FakeClock;
}

/**
 * A real key store of the given kind, a real audit writer on its database and an engine on both
 * with a fake clock: opened before the describe block's tests, closed and dropped after them.
 * Call it at the top of a describe block; read its fields inside tests (they exist once it opened).
 */
export function useEngineFixture(kind: StoreKind, options: EngineFixtureOptions = {}): EngineFixture {
  const clock = new FakeClock(options.startMs ?? Date.now());
  let opened: { t: StoreUnderTest; audit: PrismaAuditWriter; engine: Engine } | undefined;
  const get = () => {
    if (!opened) throw new Error("the engine fixture is read before its beforeAll opened it");
    return opened;
  };

  beforeAll(async () => {
    const t = await openTestStore(kind);
    const audit = new PrismaAuditWriter(t.db.prisma, options.audit ?? { flushIntervalMs: 5 });
    opened = { t, audit, engine: new Engine({ store: t.store, audit, now: options.now ?? clock.now }) };
  }, options.setupTimeoutMs ?? 60_000);
  afterAll(async () => {
    const o = opened;
    opened = undefined;
    await o?.audit.close();
    await o?.t.cleanup();
  });

  return {
    get store() { return get().t.store; },
    get db() { return get().t.db; },
    get loseData() { return get().t.loseData; },
    get audit() { return get().audit; },
    get engine() { return get().engine; },
    clock,
  };
}

/** A tool that records each run's arguments and answers with a charge id numbered by run. */
export function countingTool(): { run: RunTool; calls: unknown[] } {
  const calls: unknown[] = [];
  const run: RunTool = async (args) => {
    calls.push(args);
    return { body: { chargeId: `ch_${calls.length}` } };
  };
  return { run, calls };
}

/** The store with its begin and peekReplay calls counted: an answer from a cache makes neither. */
export function countingStore(store: KeyStore): { store: KeyStore; counter: { begins: number; reads: number } } {
  const counter = { begins: 0, reads: 0 };
  const proxy = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === "begin") return (...args: Parameters<KeyStore["begin"]>) => (counter.begins++, target.begin(...args));
      if (prop === "peekReplay" && target.peekReplay) {
        return (...args: Parameters<NonNullable<KeyStore["peekReplay"]>>) => (counter.reads++, target.peekReplay!(...args));
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { store: proxy, counter };
}
