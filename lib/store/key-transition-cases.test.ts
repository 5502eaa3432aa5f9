import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KeyStore } from "@/lib/idempotency/key-store";
import { caseName, KEY_TRANSITION_CASES, runOnRules, runOnStore } from "@/test/support/key-transition-cases";
import { openTestStore, STORE_KINDS } from "@/test/support/stores";
import { MemoryKeyStore } from "./memory/memory-key-store";

/** The shared table of key-state transitions (test/support/key-transition-cases.ts) on every store: each answers as the rules do. */
for (const kind of ["memory", ...STORE_KINDS] as const) {
  describe(`key-state transitions on the ${kind} store`, () => {
    let store: KeyStore;
    let cleanup: () => Promise<void>;
    const scope = `tr${randomUUID().slice(0, 8)}`;

    beforeAll(async () => {
      if (kind === "memory") {
        const memory = new MemoryKeyStore();
        ({ store, cleanup } = { store: memory, cleanup: () => memory.close() });
      } else {
        ({ store, cleanup } = await openTestStore(kind));
      }
    });
    afterAll(async () => {
      await cleanup?.();
    });

    KEY_TRANSITION_CASES.forEach((t, i) => {
      it(caseName(t), async () => {
        const observed = await runOnStore(store, scope, `case-${i}`, t);
        expect(observed).toEqual(t.expected);
        expect(observed).toEqual(runOnRules(t));
      });
    });
  });
}
