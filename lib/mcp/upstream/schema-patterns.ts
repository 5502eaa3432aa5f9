import { RE2JS } from "re2js";
import { z } from "zod";

/**
 * The `pattern`s of a guarded MCP server's input schema, run with a linear-time engine.
 *
 * The schema is the server's, and Idemgate validates tenants' arguments against it before anything
 * is reserved. JavaScript's RegExp backtracks: a hostile or careless server could list a pattern
 * such as `(a+)+$` that takes exponential time on a long argument, and every call of that tool
 * would hold the gateway's only thread. So no pattern of a server's schema ever reaches RegExp:
 * they are taken out of the schema before it is turned into zod, and run with RE2 (re2js: time
 * linear in the argument's length). Dropping them altogether would be safe too (the server
 * validates its own arguments), but an argument that breaks a pattern would then reserve its key
 * and store the server's refusal as a final result, instead of a 400 that reserves nothing.
 *
 * Checked here: patterns reached from the root through `properties` and `items`, the shapes tool
 * schemas use. A pattern RE2 cannot compile (backreferences, lookaround: exactly the features
 * that need backtracking), or under a combinator (`anyOf`, `oneOf`, `allOf`, `not`, `if`, `$defs`…),
 * or a `patternProperties` key, is not checked by Idemgate: the server checks it.
 */

type Step = { property: string } | { items: true };

export interface SchemaPattern {
  path: Step[];
  source: string;
  regex: RE2JS;
}

/** keywords whose value is one schema */
const ONE = ["additionalProperties", "additionalItems", "unevaluatedProperties", "unevaluatedItems", "contains", "not", "if", "then", "else", "propertyNames"];
/** keywords whose value is an array of schemas */
const MANY = ["anyOf", "oneOf", "allOf", "prefixItems"];
/** keywords whose value maps names to schemas */
const MAP = ["$defs", "definitions", "dependentSchemas"];

/**
 * A copy of `schema` without any `pattern` or `patternProperties`, and the patterns Idemgate
 * checks itself (see above). Data keywords (`const`, `enum`, `default`, `examples`) are kept as
 * they are, whatever they hold.
 */
export function takePatterns(schema: unknown): { schema: unknown; patterns: SchemaPattern[] } {
  const patterns: SchemaPattern[] = [];
  const walk = (node: unknown, path: Step[] | null): unknown => {
    if (node === null || typeof node !== "object" || Array.isArray(node)) return node;
    const out: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(node as Record<string, unknown>)) {
      if (name === "pattern" && typeof value === "string") {
        if (path !== null) {
          const regex = compiled(value);
          if (regex) patterns.push({ path, source: value, regex });
        }
      } else if (name === "patternProperties") {
        // its keys are regular expressions: not run here; the server checks them. Properties it
        // would admit must not be refused as additional ones meanwhile.
        delete out.additionalProperties;
      } else if (name === "additionalProperties" && "patternProperties" in (node as object)) {
        // dropped with patternProperties (above)
      } else if (name === "properties" && value !== null && typeof value === "object" && !Array.isArray(value)) {
        out[name] = Object.fromEntries(
          Object.entries(value as Record<string, unknown>).map(([p, s]) => [p, walk(s, path === null ? null : [...path, { property: p }])]),
        );
      } else if (name === "items") {
        out[name] = Array.isArray(value) ? value.map((s) => walk(s, null)) : walk(value, path === null ? null : [...path, { items: true }]);
      } else if (ONE.includes(name)) {
        out[name] = walk(value, null);
      } else if (MANY.includes(name) && Array.isArray(value)) {
        out[name] = value.map((s) => walk(s, null));
      } else if (MAP.includes(name) && value !== null && typeof value === "object" && !Array.isArray(value)) {
        out[name] = Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([p, s]) => [p, walk(s, null)]));
      } else {
        out[name] = value;
      }
    }
    return out;
  };
  return { schema: walk(schema, []), patterns };
}

function compiled(source: string): RE2JS | null {
  try {
    return RE2JS.compile(source);
  } catch {
    return null; // not regular (backreferences, lookaround) or not RE2 syntax: the server checks it
  }
}

/** Adds the patterns' checks to an object schema: each string found along a pattern's path must match it. */
export function withPatterns<S extends z.ZodObject<any, any>>(schema: S, patterns: readonly SchemaPattern[]): S {
  if (patterns.length === 0) return schema;
  return schema.superRefine((args, ctx) => {
    for (const p of patterns) {
      for (const { value, at } of valuesAt(args, p.path)) {
        if (typeof value === "string" && !p.regex.matcher(value).find()) {
          ctx.addIssue({ code: "custom", path: at, message: `does not match the pattern ${JSON.stringify(p.source)}` });
        }
      }
    }
  }) as S;
}

function valuesAt(root: unknown, path: readonly Step[]): { value: unknown; at: (string | number)[] }[] {
  let found: { value: unknown; at: (string | number)[] }[] = [{ value: root, at: [] }];
  for (const step of path) {
    const next: typeof found = [];
    for (const { value, at } of found) {
      if ("items" in step) {
        if (Array.isArray(value)) value.forEach((v, i) => next.push({ value: v, at: [...at, i] }));
      } else if (value !== null && typeof value === "object" && !Array.isArray(value) && Object.hasOwn(value, step.property)) {
        next.push({ value: (value as Record<string, unknown>)[step.property], at: [...at, step.property] });
      }
    }
    found = next;
  }
  return found;
}
