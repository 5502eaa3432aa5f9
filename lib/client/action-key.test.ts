import { readFileSync } from "node:fs";
import path from "node:path";
import canonicalize from "canonicalize";
import { describe, expect, it } from "vitest";
import { actionKey, canonicalJson } from "./action-key";

// The table the Python client's test_action_key.py checks too: both languages give these keys.
const table = JSON.parse(readFileSync(path.resolve(import.meta.dirname, "../../clients/python/tests/action_key_cases.json"), "utf8")) as {
  cases: { runId: string; step: number | string; tool: string; args: Record<string, unknown>; canonical: string; key: string }[];
};

describe("actionKey", () => {
  it.each(table.cases.map((c, i) => [i, c] as const))("case %i gives the table's key (the Python client's too)", async (_, c) => {
    expect(canonicalJson([c.runId, c.step, c.tool, c.args])).toBe(c.canonical);
    expect(canonicalJson([c.runId, c.step, c.tool, c.args])).toBe(canonicalize([c.runId, c.step, c.tool, c.args]));
    const key = await actionKey(c.runId, c.step, c.tool, c.args);
    expect(key).toBe(c.key);
    expect(key).toMatch(/^act-[0-9a-f]{64}$/);
  });

  it("the same action gives the same key whatever the arguments' order; another step or argument another key", async () => {
    const a = await actionKey("run", 1, "t", { x: 1, y: [1, 2] });
    expect(await actionKey("run", 1, "t", { y: [1, 2], x: 1 })).toBe(a);
    expect(await actionKey("run", 2, "t", { x: 1, y: [1, 2] })).not.toBe(a);
    expect(await actionKey("run", 1, "t", { x: 1, y: [2, 1] })).not.toBe(a);
  });

  it("refuses what is not an action", async () => {
    await expect(actionKey("", 1, "t", {})).rejects.toThrow(TypeError);
    await expect(actionKey("r", 1.5, "t", {})).rejects.toThrow(TypeError);
    await expect(actionKey("r", 1, "t", [] as unknown as Record<string, unknown>)).rejects.toThrow(TypeError);
    await expect(actionKey("r", 1, "t", { n: Number.NaN })).rejects.toThrow(TypeError);
  });
});
