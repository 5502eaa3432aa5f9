import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig, type Config } from "@/lib/server/config";
import { InvalidCursorError, isIdemgateError } from "@/lib/idempotency/errors";
import { problemAnswer } from "@/lib/http/problem";
import { beginInputs } from "@/test/support/key-store-contract";
import type { KeyStore } from "@/lib/idempotency/key-store";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";
import { CursorSeal, cursorSeal } from "./list-cursor";
import { listKeys, type KeyListQuery } from "./list-keys";

const T0 = 1_800_000_000_000;
const TOOL = "payments.charge";

function configWith(env: Record<string, string>): Config {
  return loadConfig({ IDEMGATE_DATA_DIR: path.join(os.tmpdir(), `idemgate-unused-${randomUUID()}`), ...env } as unknown as NodeJS.ProcessEnv);
}

/** Every reading of a cursor someone might try: as is, and decoded from base64/base64url as text. */
function readings(cursor: string): string[] {
  const out = [cursor, decodeURIComponent(cursor)];
  for (const encoding of ["base64url", "base64"] as const) {
    const bytes = Buffer.from(cursor, encoding);
    out.push(bytes.toString("utf8"), bytes.toString("latin1"), bytes.toString("hex"));
    // a cursor wrapping another base64 text
    const inner = Buffer.from(bytes.toString("latin1"), "base64");
    out.push(inner.toString("utf8"), inner.toString("latin1"));
  }
  return out;
}

describe.each(["redis", "postgres"] as const)("key list cursors on %s", (kind) => {
  let t: StoreUnderTest;
  let runtime: { config: Config; store: KeyStore };
  const scopeA = `ta${randomUUID().slice(0, 8)}`;
  const scopeB = `tb${randomUUID().slice(0, 8)}`;
  const aKeys: string[] = [];
  const bKeys: string[] = [];

  beforeAll(async () => {
    t = await openTestStore(kind);
    runtime = { config: configWith({ IDEMGATE_SECRET: "s".repeat(40) }), store: t.store };
    // Tenant B's calls of the same tool are interleaved with A's, and the 400 newest are all B's:
    // a read filtered to A runs out of its budget on B's entries and stops at one of them.
    const input = beginInputs(() => ({ scope: scopeA, nowMs: T0, tool: TOOL }));
    for (let i = 0; i < 520; i++) {
      const mine = i < 120 && i % 6 === 0;
      const key = mine ? `a-order-${i}` : `secret-of-b-${i}`;
      (mine ? aKeys : bKeys).push(key);
      const out = await t.store.begin(input({ scope: mine ? scopeA : scopeB, key, nowMs: T0 + i }));
      expect(out.kind).toBe("reserved");
    }
    aKeys.reverse(); // newest first
  });
  afterAll(() => t?.cleanup());

  /** Tenant A's listing, page by page, as the API route asks for it (scope fixed to the token's). */
  async function pages(query: Omit<KeyListQuery, "cursor">) {
    const keys: string[] = [];
    const cursors: string[] = [];
    let cursor: string | undefined;
    for (let n = 0; n < 1_000; n++) {
      const page = await listKeys(runtime, { ...query, cursor });
      keys.push(...page.items.map((k) => k.key));
      expect(page.items.every((k) => k.scope === query.scope)).toBe(true);
      if (page.nextCursor === null) return { keys, cursors };
      cursors.push(page.nextCursor);
      cursor = page.nextCursor;
    }
    throw new Error("the listing did not end");
  }

  it("pages through tenant A's keys exactly once, and no cursor names tenant B's scope or keys", async () => {
    for (const limit of [1, 3]) {
      const { keys, cursors } = await pages({ scope: scopeA, tool: TOOL, limit });
      expect(keys).toEqual(aKeys);
      expect(cursors.length).toBeGreaterThan(0);
      for (const cursor of cursors) {
        for (const text of readings(cursor)) {
          expect(text).not.toContain(scopeB);
          expect(text).not.toContain("secret-of-b");
          // nor A's own keys: a cursor names nothing
          expect(text).not.toContain("a-order-");
        }
      }
    }
    // without the tool filter (the scope index) and with a state filter, too
    expect((await pages({ scope: scopeA, limit: 2 })).keys).toEqual(aKeys);
    expect((await pages({ scope: scopeA, state: "inflight", tool: TOOL, limit: 2 })).keys.sort()).toEqual([...aKeys].sort());
  });

  it("refuses, as a 400 problem, a cursor that is junk, changed, unsealed or from another listing", async () => {
    const first = await listKeys(runtime, { scope: scopeA, tool: TOOL, limit: 1 });
    const cursor = first.nextCursor!;
    expect(cursor).not.toBeNull();
    const refused = async (query: KeyListQuery) => {
      const err = await listKeys(runtime, query).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(InvalidCursorError);
      expect(isIdemgateError(err)).toBe(true);
      const answer = problemAnswer(err, "/api/v1/keys");
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.body as string)).toMatchObject({ type: "/problems/invalid_cursor", status: 400 });
    };
    // the same cursor with the same filters goes on
    expect((await listKeys(runtime, { scope: scopeA, tool: TOOL, limit: 1, cursor })).items).toHaveLength(1);

    await refused({ scope: scopeA, tool: TOOL, limit: 1, cursor: "junk" });
    await refused({ scope: scopeA, tool: TOOL, limit: 1, cursor: "not a cursor at all!" });
    await refused({ scope: scopeA, tool: TOOL, limit: 1, cursor: cursor.slice(0, -4) });
    for (const at of [0, 3, 20, Math.floor(cursor.length / 2), cursor.length - 2]) {
      const flipped = cursor.slice(0, at) + (cursor[at] === "A" ? "B" : "A") + cursor.slice(at + 1);
      await refused({ scope: scopeA, tool: TOOL, limit: 1, cursor: flipped });
    }
    // another tenant's listing, or the same tenant's listing with other filters
    await refused({ scope: scopeB, tool: TOOL, limit: 1, cursor });
    await refused({ scope: scopeA, limit: 1, cursor });
    await refused({ scope: scopeA, tool: TOOL, state: "inflight", limit: 1, cursor });
    await refused({ scope: scopeA, tool: TOOL, prefix: "a-", limit: 1, cursor });
    // a store's own cursor, unsealed
    const raw = (await t.store.list({ scope: scopeA, tool: TOOL, limit: 1, nowMs: Date.now() })).nextCursor!;
    await refused({ scope: scopeA, tool: TOOL, limit: 1, cursor: raw });
    // sealed under another server's secret
    const foreign = new CursorSeal("o".repeat(40)).seal(raw, { scope: scopeA, tool: TOOL });
    await refused({ scope: scopeA, tool: TOOL, limit: 1, cursor: foreign });
  });
});

describe("cursor seal", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-cursor-"));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("uses the secret generated into the data directory when IDEMGATE_SECRET is not set, across restarts", () => {
    const filter = { scope: "s", tool: "t" };
    const sealed = cursorSeal(configWith({ IDEMGATE_DATA_DIR: dir })).seal("position", filter);
    // a new process (a new configuration) with the same data directory reads the same secret
    expect(cursorSeal(configWith({ IDEMGATE_DATA_DIR: dir })).open(sealed, filter)).toBe("position");
    expect(() => cursorSeal(configWith({ IDEMGATE_DATA_DIR: path.join(dir, "other") })).open(sealed, filter)).toThrow(InvalidCursorError);
  });

  it("hides the length of what it seals within 256 bytes, and uses a fresh nonce each time", () => {
    const seal = new CursorSeal("k".repeat(40));
    const short = seal.seal("a", {});
    const long = seal.seal("b".repeat(200), {});
    expect(short.length).toBe(long.length);
    expect(seal.seal("a", {})).not.toBe(short);
    expect(seal.open(long, {})).toBe("b".repeat(200));
    expect(seal.open(seal.seal("x".repeat(1_000), {}), {})).toBe("x".repeat(1_000));
  });
});
