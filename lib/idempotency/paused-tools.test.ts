import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { useEngineFixture } from "@/test/support/engine-fixture";
import { Engine } from "./engine";
import { isIdemgateError, UnavailableError } from "./errors";
import { PausedTools, pauseOf, type ToolPause } from "./paused-tools";
import type { RunTool, ToolPolicy } from "./tool";

// Pauses fail closed: while the paused tools could not be read (the audit database did not answer
// when the process started), a write tool's new first executions are refused with 503 unavailable
// (the audit database) and nothing is reserved or run; a done key still replays; once a read
// succeeds, calls run. A read that hangs fails after its timeout, so later reads still happen.

const charge: ToolPolicy = { name: "paused.charge", kind: "write", ttlMs: 60_000, leaseMs: 5_000, stuckPolicy: "block", fallbackTtlMs: null, dedupes: false };

function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe("paused tools that could not be read (postgres key store)", () => {
  const t = useEngineFixture("postgres");
  const scope = () => `unread-${randomUUID().slice(0, 8)}`;

  it("refuses new first executions as unavailable until a read succeeds; a done key still replays", async () => {
    const ran: unknown[] = [];
    const run: RunTool = async (args) => {
      ran.push(args);
      return { body: { chargeId: `ch_${ran.length}` } };
    };
    const s = scope();
    // a key done before this process started
    const done = await t.engine.invoke(charge, run, { scope: s, key: "done", args: { amountCents: 1 } });
    expect(ran).toHaveLength(1);

    let answer: () => Promise<ToolPause[]> = () => Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:5432"));
    const paused = new PausedTools(() => answer());
    const engine = new Engine({ store: t.store, audit: t.audit, now: t.clock.now, pausedTools: paused });
    await expect(paused.refresh()).rejects.toThrow("ECONNREFUSED");
    expect(pauseOf(charge, paused)?.source).toBe("unread");

    const refused = await engine.invoke(charge, run, { scope: s, key: "new", args: { amountCents: 2 } }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(UnavailableError);
    expect((refused as UnavailableError).component).toBe("audit_log");
    expect(ran).toHaveLength(1);
    expect(await t.store.get(s, "new")).toBeNull();
    const replay = await engine.invoke(charge, run, { scope: s, key: "done", args: { amountCents: 1 } });
    expect(replay.kind).toBe("replayed");
    expect(replay.body).toBe(done.body);

    answer = async () => [];
    await paused.refresh();
    expect(pauseOf(charge, paused)).toBeNull();
    expect((await engine.invoke(charge, run, { scope: s, key: "new", args: { amountCents: 2 } })).kind).toBe("executed");
    expect(ran).toHaveLength(2);

    // a failed read after one succeeded keeps the last answer: not paused, calls run
    answer = () => Promise.reject(new Error("gone again"));
    await expect(paused.refresh()).rejects.toThrow("gone again");
    expect(pauseOf(charge, paused)).toBeNull();
  });

  it("a read that hangs fails after its timeout and the next read goes ahead", async () => {
    const hung = deferred<ToolPause[]>();
    const pause: ToolPause = { tool: charge.name, reason: "provider incident", actor: "ops@example.com", pausedAtMs: 1, source: "operator" };
    let reads = 0;
    const paused = new PausedTools(() => (++reads === 1 ? hung.promise : Promise.resolve([pause])), 20);
    const failed = await paused.refresh().catch((err: unknown) => err);
    expect(String(failed)).toContain("not read within 20 ms");
    expect(pauseOf(charge, paused)?.source).toBe("unread");
    await paused.refresh();
    expect(reads).toBe(2);
    expect(pauseOf(charge, paused)).toEqual(pause);
    // what the hung read answers late is dropped
    hung.resolve([]);
    await hung.promise;
    expect(pauseOf(charge, paused)).toEqual(pause);
    expect(isIdemgateError(failed)).toBe(false);
  });
});
