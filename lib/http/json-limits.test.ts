import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { nestsDeeperThan } from "@/lib/idempotency/fingerprint";
import { scanJson } from "./json-limits";

const nested = (levels: number, inner = "1") => "[".repeat(levels) + inner + "]".repeat(levels);

describe("scanJson: nesting", () => {
  it("allows exactly maxDepth levels and stops at the first level beyond", () => {
    expect(scanJson(nested(64), { maxDepth: 64 }).tooDeep).toBe(false);
    expect(scanJson(nested(65), { maxDepth: 64 }).tooDeep).toBe(true);
    expect(scanJson('{"a":{"b":[{"c":[]}]}}', { maxDepth: 5 }).tooDeep).toBe(false);
    expect(scanJson('{"a":{"b":[{"c":[]}]}}', { maxDepth: 4 }).tooDeep).toBe(true);
    // depth is nesting, not the number of containers
    expect(scanJson(`[${Array.from({ length: 1_000 }, () => "[[]]").join(",")}]`, { maxDepth: 3 }).tooDeep).toBe(false);
  });

  it("refuses 100,000 levels at once, and an unclosed million (no recursion to overflow)", () => {
    expect(scanJson(nested(100_000), { maxDepth: 64 }).tooDeep).toBe(true);
    expect(scanJson("[".repeat(1_000_000), { maxDepth: 64 }).tooDeep).toBe(true);
  });

  it("does not count brackets inside strings, escaped quotes included", () => {
    const text = JSON.stringify({ a: "[[[[{{{{", b: 'say \\"[[[[', c: "ends in a backslash \\", d: [["x"]] });
    expect(scanJson(text, { maxDepth: 3 }).tooDeep).toBe(false);
    expect(scanJson(text, { maxDepth: 2 }).tooDeep).toBe(true);
  });

  it("agrees with the nesting of the parsed value, for any JSON", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), fc.integer({ min: 0, max: 7 }), (value, max) => {
        expect(scanJson(JSON.stringify(value), { maxDepth: max }).tooDeep).toBe(nestsDeeperThan(value, max));
      }),
    );
  });
});

describe("scanJson: integers JSON.parse would round", () => {
  it("reports integer literals beyond ±(2^53 − 1) with their paths", () => {
    const text = '{"amount": 9007199254740993, "items": [{"id": 1}, {"id": -12345678901234567890, "n": 2}], "ok": 9007199254740991}';
    expect(scanJson(text, { maxDepth: 64 }).unsafeIntegers).toEqual([
      { path: "amount", literal: "9007199254740993" },
      { path: "items[1].id", literal: "-12345678901234567890" },
    ]);
  });

  it("draws the line at Number.MAX_SAFE_INTEGER on both sides", () => {
    const found = (text: string) => scanJson(text, { maxDepth: 64 }).unsafeIntegers.map((u) => u.literal);
    expect(found("[9007199254740991, -9007199254740991, 999999999999999]")).toEqual([]);
    expect(found("[9007199254740992, -9007199254740992]")).toEqual(["9007199254740992", "-9007199254740992"]);
  });

  it("leaves numbers with a fraction or an exponent, and digits in strings and names, alone", () => {
    const text = '{"12345678901234567890": "12345678901234567890", "f": 9007199254740993.5, "e": 1e21, "E": 90071992547409930E0}';
    expect(scanJson(text, { maxDepth: 64 }).unsafeIntegers).toEqual([]);
  });

  it("names the root, escaped member names and members after a nested value", () => {
    expect(scanJson("18446744073709551616", { maxDepth: 64 }).unsafeIntegers[0].path).toBe("(body)");
    expect(scanJson("18446744073709551616", { maxDepth: 64, root: "(arguments)" }).unsafeIntegers[0].path).toBe("(arguments)");
    const text = '{"a\\"b": {"x": [1, {"y": 2}], "z": 18446744073709551616}, "w": [[0, 18446744073709551616]]}';
    expect(scanJson(text, { maxDepth: 64 }).unsafeIntegers.map((u) => u.path)).toEqual(['a"b.z', "w[0][1]"]);
  });

  it("reports at most maxReported", () => {
    const text = JSON.stringify(Array.from({ length: 50 }, () => 0)).replaceAll("0", "18446744073709551616");
    expect(scanJson(text, { maxDepth: 64, maxReported: 3 }).unsafeIntegers.map((u) => u.path)).toEqual(["[0]", "[1]", "[2]"]);
  });

  it("ends on text that is not JSON", () => {
    for (const text of ['"unterminated', '{"a": [1, 2', "]]]}}}", '{"a" 1 2 3}', "-", "--12345678901234567890", "\\\\\\\""]) {
      expect(() => scanJson(text, { maxDepth: 64 }), text).not.toThrow();
    }
  });
});
