import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import addFormatsImport from "ajv-formats";
import { z } from "zod";
import type { ArgsSchema } from "./define-tool";

export type JsonSchemaObject = Record<string, unknown>;

/** One problem with a JSON Schema or with arguments: a dotted path (`items[2].sku`) and what is wrong there. */
export interface SchemaIssue {
  /** the path's segments: property names and array indexes */
  path: (string | number)[];
  message: string;
}

// ajv-formats is CommonJS: a bundler hands out its module object, Node its function
const addFormats = ((addFormatsImport as unknown as { default?: unknown }).default ?? addFormatsImport) as typeof addFormatsImport;

/**
 * One validator for every declared schema (draft 2020-12, the dialect of the OpenAPI document and
 * of MCP's tool schemas). Strict: a keyword or format it does not know is an error in the schema,
 * not silently ignored, so a typo (`minimun`) refuses the configuration instead of accepting anything.
 * `allErrors` reports every problem of a call at once, as in-process tools do; the schemas come from
 * the operator's configuration, and arguments are bounded by the gateway's body limit.
 */
function makeAjv(): Ajv2020 {
  const ajv = new Ajv2020({ strict: true, allErrors: true, validateFormats: true, allowUnionTypes: true });
  addFormats(ajv);
  return ajv;
}

let shared: Ajv2020 | undefined;
const ajv = () => (shared ??= makeAjv());

/** `/a/0/b~1c` → ["a", 0, "b/c"] */
function pointerSegments(pointer: string): (string | number)[] {
  if (pointer === "") return [];
  return pointer
    .slice(1)
    .split("/")
    .map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"))
    .map((s) => (/^(0|[1-9]\d*)$/.test(s) ? Number(s) : s));
}

/** ajv's errors as issues named by the path of the offending value, as zod names them. */
export function ajvIssues(errors: readonly ErrorObject[] | null | undefined, unknownArgumentMessage = "is not allowed here"): SchemaIssue[] {
  return (errors ?? []).map((e) => {
    const path = pointerSegments(e.instancePath);
    if (e.keyword === "required") return { path: [...path, String(e.params.missingProperty)], message: "is required" };
    if (e.keyword === "additionalProperties" || e.keyword === "unevaluatedProperties") {
      const name = String(e.params.additionalProperty ?? e.params.unevaluatedProperty);
      return { path: [...path, name], message: unknownArgumentMessage };
    }
    return { path, message: e.message ?? `fails ${e.keyword}` };
  });
}

/**
 * Compiles a tool's `inputSchema`. Its problems are issues with paths inside the schema
 * (`properties.amountCents.minimum: must be number`); a tool's arguments are an object, so the
 * schema must say `type: object`.
 */
export function compileInputSchema(schema: unknown): { ok: true; validate: ValidateFunction } | { ok: false; issues: SchemaIssue[] } {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return { ok: false, issues: [{ path: [], message: "must be a JSON Schema object" }] };
  const s = schema as JsonSchemaObject;
  if (s.type !== "object") return { ok: false, issues: [{ path: ["type"], message: 'must be "object": a tool\'s arguments are a JSON object' }] };
  const instance = ajv();
  if (!instance.validateSchema(s)) return { ok: false, issues: firstPerPath(ajvIssues(instance.errors)) };
  try {
    // strict mode finds what the meta-schema allows but no validator knows: unknown keywords and formats
    return { ok: true, validate: instance.compile(s) };
  } catch (err) {
    const message = (err instanceof Error ? err.message : String(err)).replace(/^strict mode: /, "");
    const keyword = /^unknown keyword: "(.+)"$/.exec(message)?.[1];
    if (keyword !== undefined) return { ok: false, issues: [{ path: keywordPath(s, keyword) ?? [], message: "is not a JSON Schema keyword" }] };
    const at = /^(.*) in schema at path "#(.*)"$/.exec(message);
    if (at) return { ok: false, issues: [{ path: pointerSegments(at[2]), message: at[1].replace(/ ignored$/, "") }] };
    return { ok: false, issues: [{ path: [], message }] };
  }
}

/** The meta-schema reports a bad value once per alternative it tried; the first says it. */
function firstPerPath(issues: SchemaIssue[]): SchemaIssue[] {
  const seen = new Set<string>();
  return issues.filter((i) => {
    const key = JSON.stringify(i.path);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** Maps of subschemas keyed by names of the schema's author, not by keywords. */
const NAMED_SUBSCHEMAS = new Set(["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"]);

/** Where a keyword first appears in a schema (strict mode names the keyword, not its place). */
function keywordPath(schema: unknown, keyword: string, path: (string | number)[] = []): (string | number)[] | null {
  if (Array.isArray(schema)) {
    for (const [i, item] of schema.entries()) {
      const found = keywordPath(item, keyword, [...path, i]);
      if (found) return found;
    }
    return null;
  }
  if (typeof schema !== "object" || schema === null) return null;
  if (Object.hasOwn(schema, keyword)) return [...path, keyword];
  for (const [key, value] of Object.entries(schema)) {
    if (NAMED_SUBSCHEMAS.has(key) && typeof value === "object" && value !== null) {
      for (const [name, sub] of Object.entries(value)) {
        const found = keywordPath(sub, keyword, [...path, key, name]);
        if (found) return found;
      }
    } else if (typeof value === "object" && key !== "enum" && key !== "const" && key !== "examples" && key !== "default") {
      const found = keywordPath(value, keyword, [...path, key]);
      if (found) return found;
    }
  }
  return null;
}

/**
 * A zod schema that accepts any object and checks it with the compiled JSON Schema, so a tool
 * declared in JSON Schema validates through the registry like any other: invalid arguments are a
 * 400 with each of the validator's problems named by its path.
 */
export function argsSchemaFromJsonSchema(validate: ValidateFunction, tool: string): ArgsSchema {
  return z.looseObject({}).superRefine((args, ctx) => {
    if (validate(args)) return;
    for (const issue of ajvIssues(validate.errors, `is not an argument of ${tool}`)) ctx.addIssue({ code: "custom", path: issue.path, message: issue.message });
  });
}
