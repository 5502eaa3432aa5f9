/**
 * Reading the tools' JSON Schemas (as lib/tools/api-schemas.ts emits them) for people: example
 * arguments for the invoke form and the curl examples, and a flat table of the arguments.
 * Pure functions, shared by server and client components.
 */

export type JsonSchema = Record<string, unknown>;

function asSchema(value: unknown): JsonSchema {
  return value && typeof value === "object" && !Array.isArray(value) ? (value as JsonSchema) : {};
}

function properties(schema: JsonSchema): [string, JsonSchema][] {
  return Object.entries(asSchema(schema.properties)).map(([name, s]) => [name, asSchema(s)]);
}

function required(schema: JsonSchema): Set<string> {
  return new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
}

function typeOf(schema: JsonSchema): string {
  if (Array.isArray(schema.enum)) return "enum";
  if (typeof schema.type === "string") return schema.type;
  if (Array.isArray(schema.type)) return (schema.type as string[]).join(" | ");
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as unknown[]).map((s) => typeOf(asSchema(s))).join(" | ");
  return "any";
}

/** Values that read like real data for the argument names the demo tools (and most APIs) use. */
function exampleString(name: string, schema: JsonSchema): string {
  if (schema.format === "email") return "ada@example.com";
  if (schema.format === "date-time") return "2025-01-31T14:03:09Z";
  if (schema.format === "uri" || schema.format === "url") return "https://example.com";
  if (schema.pattern === "^[A-Z]{3}$" || /currency/i.test(name)) return "USD";
  const id = /^(.*?)_?id$/i.exec(name);
  if (id && id[1]) {
    const prefix = id[1].toLowerCase() === "charge" ? "ch" : id[1].toLowerCase().slice(0, 4);
    return `${prefix}_1001`;
  }
  if (/^(title|subject)$/i.test(name)) return "Order 1001 did not arrive";
  if (/^(body|description|message|text)$/i.test(name)) return "Sent from the Idemgate console";
  const min = typeof schema.minLength === "number" ? schema.minLength : 1;
  return "example".padEnd(min, "x");
}

function exampleNumber(schema: JsonSchema, integer: boolean, name: string): number {
  const lower = typeof schema.minimum === "number" ? schema.minimum : typeof schema.exclusiveMinimum === "number" ? schema.exclusiveMinimum + (integer ? 1 : 0.5) : null;
  const upper = typeof schema.maximum === "number" ? schema.maximum : null;
  let value = /cents|amount/i.test(name) ? 1250 : 1;
  if (lower !== null && value < lower) value = lower;
  if (upper !== null && value > upper) value = upper;
  return integer ? Math.round(value) : value;
}

/** An example value for a schema: required properties only, so it is the smallest valid call. */
export function exampleFromSchema(schema: JsonSchema, name = ""): unknown {
  if ("examples" in schema && Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0];
  if ("default" in schema) return schema.default;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  if ("const" in schema) return schema.const;
  switch (typeOf(schema)) {
    case "object": {
      const req = required(schema);
      return Object.fromEntries(properties(schema).filter(([key]) => req.has(key)).map(([key, s]) => [key, exampleFromSchema(s, key)]));
    }
    case "array":
      return [exampleFromSchema(asSchema(schema.items), name)];
    case "string":
      return exampleString(name, schema);
    case "integer":
      return exampleNumber(schema, true, name);
    case "number":
      return exampleNumber(schema, false, name);
    case "boolean":
      return false;
    default:
      return null;
  }
}

export interface ArgumentRow {
  /** dotted for nested objects: simulate.outcome */
  name: string;
  type: string;
  required: boolean;
  description: string | null;
  /** human-readable constraints: "1–128 characters", "> 0", "one of: ok, decline" */
  constraints: string[];
  depth: number;
}

function constraintsOf(schema: JsonSchema): string[] {
  const out: string[] = [];
  const { minLength, maxLength, minimum, maximum, exclusiveMinimum, exclusiveMaximum, pattern, format, minItems, maxItems } = schema as Record<string, unknown>;
  if (typeof minLength === "number" && typeof maxLength === "number") out.push(`${minLength}–${maxLength} characters`);
  else if (typeof maxLength === "number") out.push(`at most ${maxLength} characters`);
  else if (typeof minLength === "number") out.push(`at least ${minLength} characters`);
  if (typeof exclusiveMinimum === "number") out.push(`> ${exclusiveMinimum}`);
  if (typeof minimum === "number") out.push(`≥ ${minimum}`);
  if (typeof exclusiveMaximum === "number") out.push(`< ${exclusiveMaximum}`);
  if (typeof maximum === "number") out.push(`≤ ${maximum.toLocaleString("en-US")}`);
  if (typeof minItems === "number") out.push(`at least ${minItems} items`);
  if (typeof maxItems === "number") out.push(`at most ${maxItems} items`);
  if (typeof format === "string") out.push(`format ${format}`);
  if (typeof pattern === "string") out.push(`pattern ${pattern}`);
  if (Array.isArray(schema.enum)) out.push(`one of: ${(schema.enum as unknown[]).map((v) => JSON.stringify(v)).join(", ")}`);
  return out;
}

/** The arguments of an object schema as table rows; nested objects follow their parent, indented. */
export function argumentRows(schema: JsonSchema, prefix = "", depth = 0): ArgumentRow[] {
  const req = required(schema);
  return properties(schema).flatMap(([key, s]) => {
    const name = prefix ? `${prefix}.${key}` : key;
    const row: ArgumentRow = {
      name,
      type: typeOf(s),
      required: req.has(key),
      description: typeof s.description === "string" ? s.description : null,
      constraints: constraintsOf(s),
      depth,
    };
    return typeOf(s) === "object" && s.properties ? [row, ...argumentRows(s, name, depth + 1)] : [row];
  });
}
