import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { InvalidArgumentsError } from "./errors";
import { canonicalJson, fingerprint, MAX_JSON_DEPTH, nestsDeeperThan } from "./fingerprint";
import { fallbackKey, validateKey } from "./key-rules";

/** The same object with its keys inserted in another order, at every depth. */
function shuffleKeys(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((v, i) => shuffleKeys(v, seed + i));
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    const rotated = entries.map((_, i) => entries[(i + seed) % entries.length]);
    return Object.fromEntries(rotated.reverse().map(([k, v]) => [k, shuffleKeys(v, seed + 1)]));
  }
  return value;
}

const json = fc.jsonValue({ maxDepth: 4 });

describe("fingerprint", () => {
  it("does not depend on key order at any depth", () => {
    fc.assert(
      fc.property(json, fc.nat(), (value, seed) => {
        expect(fingerprint("t", shuffleKeys(value, seed))).toBe(fingerprint("t", value));
      }),
    );
  });

  it("is the same for a value and its JSON round trip (unicode and numbers included)", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 3, stringUnit: "binary" }), (value) => {
        expect(fingerprint("t", JSON.parse(JSON.stringify(value)))).toBe(fingerprint("t", value));
      }),
    );
  });

  it("tells different arguments and different tools apart", () => {
    fc.assert(
      fc.property(json, json, (a, b) => {
        fc.pre(canonicalJson(a) !== canonicalJson(b));
        expect(fingerprint("t", a)).not.toBe(fingerprint("t", b));
      }),
    );
    expect(fingerprint("payments.charge", { a: 1 })).not.toBe(fingerprint("payments.refund", { a: 1 }));
  });

  it("writes numbers and strings the RFC 8785 way", () => {
    expect(canonicalJson({ b: 1.0, a: [1e21, 0.000001, -0], c: "é\u2028" })).toBe('{"a":[1e+21,0.000001,0],"b":1,"c":"é\u2028"}');
    expect(() => canonicalJson(undefined)).toThrow();
  });
});

/** `levels` arrays inside each other, built without recursion */
function nestedArrays(levels: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

describe("nesting limit", () => {
  it(`fingerprints ${MAX_JSON_DEPTH} levels and refuses one more as invalid arguments (400), not a stack overflow`, () => {
    expect(MAX_JSON_DEPTH).toBe(64);
    expect(fingerprint("t", { a: nestedArrays(MAX_JSON_DEPTH - 1) })).toMatch(/^[0-9a-f]{64}$/);
    for (const deep of [{ a: nestedArrays(MAX_JSON_DEPTH) }, nestedArrays(100_000)]) {
      const err = (() => {
        try {
          fingerprint("t", deep);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(InvalidArgumentsError);
      expect(err).toMatchObject({ code: "invalid_arguments", message: expect.stringContaining("more than 64 levels") });
    }
  });

  it("counts objects and arrays alike, and a cycle as too deep", () => {
    expect(nestsDeeperThan({ a: [{ b: [] }] }, 4)).toBe(false);
    expect(nestsDeeperThan({ a: [{ b: [] }] }, 3)).toBe(true);
    expect(nestsDeeperThan("text", 0)).toBe(false);
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(() => canonicalJson(cycle)).toThrow(InvalidArgumentsError);
  });
});

describe("idempotency keys", () => {
  it("accepts 1 to 255 printable ASCII characters", () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i))), minLength: 1, maxLength: 255 }), (key) => {
        fc.pre(!key.startsWith("fallback:") && key !== "." && key !== "..");
        expect(validateKey(key)).toBe(key);
      }),
    );
  });

  it("refuses empty, long, non-ASCII, control characters and the reserved prefix", () => {
    for (const bad of ["", "x".repeat(256), "clé", "a\nb", "tab\there", "\u0000", "fallback:abc"]) {
      expect(() => validateKey(bad), JSON.stringify(bad)).toThrow(/Idempotency-Key/);
    }
    expect(fallbackKey("ab")).toBe("fallback:ab");
  });

  it('refuses "." and ".." (they cannot be URL path segments) and accepts keys that only contain dots', () => {
    for (const bad of [".", ".."]) expect(() => validateKey(bad), bad).toThrow(/Idempotency-Key is invalid: ".*" is not allowed/);
    for (const good of ["...", ".a", "a.", "./", "%2e", ". "]) expect(validateKey(good)).toBe(good);
  });
});
