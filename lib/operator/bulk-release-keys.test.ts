import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { stateOf } from "@/lib/idempotency/record";
import { beginInputs } from "@/test/support/key-store-contract";
import { getRegistry } from "@/lib/tools";
import { openTestStore, type StoreKind, type StoreUnderTest } from "@/test/support/stores";
import { bulkReleaseKeys } from "./bulk-release-keys";

// A bulk release acts on held keys (stuck and unknown) and never on a call still running: the
// selection refuses it, and "all matching" does not find it.
describe.each<StoreKind>(["redis", "postgres"])("bulk release on %s", (kind) => {
  let t: StoreUnderTest;
  let audit: PrismaAuditWriter;
  let engine: Engine;
  const registry = getRegistry();
  const runtime = () => ({ db: t.db, store: t.store, engine, registry });
  const actor = "ops@example.com";

  beforeAll(async () => {
    t = await openTestStore(kind);
    audit = new PrismaAuditWriter(t.db.prisma, { flushIntervalMs: 5 });
    engine = new Engine({ store: t.store, audit });
  });
  afterAll(async () => {
    await audit?.close();
    await t?.cleanup();
  });

  /** One key in each state under a fresh scope: stuck, unknown, running (inflight within its lease), done. */
  async function keysInEveryState() {
    const scope = `bulk-${randomUUID().slice(0, 8)}`;
    const now = Date.now();
    const input = beginInputs(() => ({ scope, nowMs: now }));
    const reserve = async (key: string, over: { nowMs?: number; leaseMs?: number } = {}) => {
      const begun = await t.store.begin(input({ key, ...over }));
      if (begun.kind !== "reserved") throw new Error(`${key}: ${begun.kind}`);
      return begun.token;
    };
    // reserved 10 minutes ago with a one-minute lease: stuck now
    await reserve("stuck", { nowMs: now - 600_000 });
    const unknown = await reserve("unknown");
    expect(await t.store.markUnknown(scope, "unknown", unknown, "timed out after 400 ms", now)).toMatchObject({ ok: true });
    await reserve("running", { leaseMs: 600_000 });
    const done = await reserve("done");
    expect(await t.store.complete(scope, "done", done, { status: 200, body: "{}", final: false }, 60_000, now)).toMatchObject({ ok: true });
    const states = async () =>
      Object.fromEntries(
        await Promise.all(
          ["stuck", "unknown", "running", "done"].map(async (key) => {
            const r = await t.store.get(scope, key);
            return [key, r ? stateOf(r, Date.now()) : "absent"];
          }),
        ),
      );
    expect(await states()).toEqual({ stuck: "stuck", unknown: "unknown", running: "inflight", done: "done" });
    return { scope, states };
  }

  it("all matching a filter: the stuck and the unknown keys, not the running or the done one", async () => {
    const { scope, states } = await keysInEveryState();
    const out = await bulkReleaseKeys(runtime(), { filter: { scope }, actor, reason: "PSP outage: none of these went through" });
    expect(out).toEqual({ released: 2, refused: [], more: false });
    expect(await states()).toEqual({ stuck: "absent", unknown: "absent", running: "inflight", done: "done" });
  });

  it("a state in the filter narrows it to that state", async () => {
    const { scope, states } = await keysInEveryState();
    expect(await bulkReleaseKeys(runtime(), { filter: { scope, state: "unknown" }, actor, reason: "the service applied none of these" })).toMatchObject({ released: 1 });
    expect(await states()).toMatchObject({ stuck: "stuck", unknown: "absent" });
    expect(await bulkReleaseKeys(runtime(), { filter: { scope, state: "stuck" }, actor, reason: "the holders crashed before acting" })).toMatchObject({ released: 1 });
    expect(await states()).toMatchObject({ stuck: "absent", running: "inflight" });
  });

  it("selected keys: a running call and a done key are refused and listed, never forced", async () => {
    const { scope, states } = await keysInEveryState();
    const keys = ["stuck", "unknown", "running", "done"].map((key) => ({ scope, key }));
    const out = await bulkReleaseKeys(runtime(), { keys, actor, reason: "clearing this scope" });
    expect(out.released).toBe(2);
    expect(out.refused.map((r) => r.key).sort()).toEqual(["done", "running"]);
    expect(out.refused.find((r) => r.key === "running")?.reason).toMatch(/still running/);
    expect(await states()).toEqual({ stuck: "absent", unknown: "absent", running: "inflight", done: "done" });
  });

  it("selected keys with the tokens they were listed with: a key another call took since is refused and listed", async () => {
    const { scope, states } = await keysInEveryState();
    const listed = await Promise.all(["stuck", "unknown"].map(async (key) => ({ scope, key, token: (await t.store.get(scope, key))!.token })));
    // the stuck key is released elsewhere and taken by a new call, which is stuck in its turn
    await t.store.release(scope, "stuck", { nowMs: Date.now() });
    const again = await t.store.begin(beginInputs(() => ({ scope, nowMs: Date.now() - 600_000 }))({ key: "stuck" }));
    expect(again.kind).toBe("reserved");
    const out = await bulkReleaseKeys(runtime(), { keys: listed, actor, reason: "clearing what this page showed" });
    expect(out.released).toBe(1);
    expect(out.refused).toEqual([{ scope, key: "stuck", reason: expect.stringMatching(/^another call holds this key now/) }]);
    expect(await states()).toMatchObject({ stuck: "stuck", unknown: "absent" });
  });
});
