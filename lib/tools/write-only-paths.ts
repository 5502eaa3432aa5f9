/** The deepest a schema is followed through `$ref`s and subschemas looking for writeOnly properties. */
const MAX_DEPTH = 32;

type Schema = Record<string, unknown>;

const isSchema = (v: unknown): v is Schema => v !== null && typeof v === "object" && !Array.isArray(v);

const escape = (name: string) => name.replace(/~/g, "~0").replace(/\//g, "~1");

/**
 * The paths of the values a JSON Schema marks `writeOnly: true` (a password sent, never read back):
 * JSON pointers whose member `*` stands for every array item (`items`) or every other member
 * (`additionalProperties`). Followed through `properties`, `items`, `prefixItems`,
 * `additionalProperties`, `allOf`/`anyOf`/`oneOf` and the document's own `$ref`s (`#/$defs/…`).
 */
export function writeOnlyPaths(schema: unknown): string[] {
  const root = isSchema(schema) ? schema : {};
  const found = new Set<string>();
  const visit = (node: unknown, at: string, depth: number) => {
    if (!isSchema(node) || depth > MAX_DEPTH) return;
    if (node.writeOnly === true && at !== "") {
      found.add(at);
      return;
    }
    if (typeof node.$ref === "string") visit(resolveRef(root, node.$ref), at, depth + 1);
    for (const key of ["allOf", "anyOf", "oneOf"] as const) {
      const list = node[key];
      if (Array.isArray(list)) for (const sub of list) visit(sub, at, depth + 1);
    }
    if (isSchema(node.properties)) for (const [name, sub] of Object.entries(node.properties)) visit(sub, `${at}/${escape(name)}`, depth + 1);
    if (isSchema(node.additionalProperties)) visit(node.additionalProperties, `${at}/*`, depth + 1);
    if (isSchema(node.items)) visit(node.items, `${at}/*`, depth + 1);
    if (Array.isArray(node.prefixItems)) node.prefixItems.forEach((sub, i) => visit(sub, `${at}/${i}`, depth + 1));
  };
  visit(root, "", 0);
  return [...found];
}

/** A `$ref` within the document (`#/$defs/card`); others name nothing here. */
function resolveRef(root: Schema, ref: string): unknown {
  if (!ref.startsWith("#")) return undefined;
  let at: unknown = root;
  for (const part of ref.slice(1).split("/").slice(1)) {
    if (!isSchema(at)) return undefined;
    at = at[decodeURIComponent(part).replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  return at;
}
