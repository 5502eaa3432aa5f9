import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { expect } from "vitest";
import type { Engine, InvokeResult } from "@/lib/idempotency/engine";
import type { RunTool, ToolPolicy } from "@/lib/idempotency/tool";

/**
 * Property: two engines answer every random sequence of calls alike — the same results, replays
 * and errors, in order — over a few keys, two argument sets, clock steps across the tool's TTL and
 * tool failures. `engines(now)` builds the pair on a clock the property moves (from `startMs`);
 * each engine gets a scope of its own. Returns the clock after the last run.
 */
export async function expectSameAnswers(
  tool: ToolPolicy,
  engines: (now: () => number) => { expected: Engine; actual: Engine },
  startMs: number,
  numRuns = 25,
): Promise<number> {
  let last = startMs;
  const step = fc.record({
    key: fc.constantFrom("a", "b", "c"),
    amount: fc.constantFrom(1, 2),
    advanceMs: fc.constantFrom(0, 1_000, tool.ttlMs / 2, tool.ttlMs + 1_000),
    fails: fc.boolean(),
  });
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
      let now = startMs;
      const pair = engines(() => now);
      const seen = { expected: [] as string[], actual: [] as string[] };
      const scopes = { expected: `eq${randomUUID().slice(0, 8)}`, actual: `eq${randomUUID().slice(0, 8)}` };
      for (const { key, amount, advanceMs, fails } of steps) {
        now += advanceMs;
        for (const which of ["expected", "actual"] as const) {
          let n = 0;
          const run: RunTool = async () => {
            if (fails) throw new Error("upstream down");
            return { body: { n: ++n, amount } };
          };
          seen[which].push(
            await pair[which].invoke(tool, run, { scope: scopes[which], key, args: { amount } }).then(
              (out: InvokeResult) => `${out.kind} ${"body" in out ? out.body : ""}`,
              (err: Error) => err.name,
            ),
          );
        }
      }
      expect(seen.actual).toEqual(seen.expected);
      last = Math.max(last, now);
    }),
    { numRuns },
  );
  return last;
}
