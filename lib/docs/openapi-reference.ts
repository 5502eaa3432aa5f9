import type { OpenApiDocument } from "@/lib/tools";
import { argumentRows, exampleFromSchema, type ArgumentRow, type JsonSchema } from "./json-schema";

/**
 * The gateway's OpenAPI document (registry.openApiDocument) read back into what the API reference
 * page shows, so the page and /api/v1/openapi.json cannot disagree.
 */

export interface HeaderRow {
  name: string;
  required: boolean | "unused";
  description: string;
}

export interface ResponseRow {
  status: string;
  description: string;
  contentTypes: string[];
  headers: string[];
}

export interface OperationReference {
  tool: string;
  method: string;
  path: string;
  summary: string;
  kind: "read" | "write";
  policy: { ttlMs: number; leaseMs: number; stuckPolicy: string; fallbackTtlMs: number | null; source: string };
  idempotencyKey: "required" | "optional" | "unused";
  headers: HeaderRow[];
  arguments: ArgumentRow[];
  exampleArguments: unknown;
  exampleResult: unknown;
  responses: ResponseRow[];
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json => (v && typeof v === "object" && !Array.isArray(v) ? (v as Json) : {});

function resolve(doc: OpenApiDocument, value: unknown): Json {
  const ref = obj(value).$ref;
  if (typeof ref !== "string" || !ref.startsWith("#/")) return obj(value);
  return obj(ref.slice(2).split("/").reduce<unknown>((node, part) => obj(node)[part], doc));
}

export function toolOperations(doc: OpenApiDocument): OperationReference[] {
  const out: OperationReference[] = [];
  for (const [path, item] of Object.entries(doc.paths)) {
    const op = obj(item.post);
    const x = obj(op["x-idemgate"]);
    if (!op.operationId || !x.kind) continue;
    const tool = decodeURIComponent(/^\/api\/v1\/tools\/(.+)\/(?:invoke|reservations)$/.exec(path)?.[1] ?? path);
    const params = (Array.isArray(op.parameters) ? op.parameters : []).map((p) => resolve(doc, p));
    const keyParam = params.find((p) => p.name === "Idempotency-Key");
    const idempotencyKey = !keyParam ? "unused" : keyParam.required ? "required" : "optional";
    const headers: HeaderRow[] = [
      { name: "Authorization", required: true, description: "Bearer <API token>; the token's scope is the namespace of the keys" },
      { name: "Content-Type", required: false, description: "application/json (the default)" },
      ...(keyParam ? [] : [{ name: "Idempotency-Key", required: "unused" as const, description: "ignored: read tools are never gated" }]),
      ...params.map((p) => ({ name: String(p.name), required: Boolean(p.required), description: String(p.description ?? "") })),
    ];
    const argsSchema = obj(obj(obj(obj(op.requestBody).content)["application/json"]).schema) as JsonSchema;
    const responses = Object.entries(obj(op.responses)).map(([status, r]) => {
      const res = resolve(doc, r);
      return {
        status,
        description: String(res.description ?? ""),
        contentTypes: Object.keys(obj(res.content)),
        headers: Object.keys(obj(res.headers)),
      };
    });
    const success = resolve(doc, obj(op.responses)["200"]);
    const resultSchema = obj(obj(obj(success.content)["application/json"]).schema) as JsonSchema;
    out.push({
      tool,
      method: "POST",
      path,
      summary: String(op.summary ?? ""),
      kind: x.kind === "read" ? "read" : "write",
      policy: {
        ttlMs: Number(x.ttlMs),
        leaseMs: Number(x.leaseMs),
        stuckPolicy: String(x.stuckPolicy),
        fallbackTtlMs: typeof x.fallbackTtlMs === "number" ? x.fallbackTtlMs : null,
        source: String(x.source),
      },
      idempotencyKey,
      headers,
      arguments: argumentRows(argsSchema),
      exampleArguments: exampleFromSchema(argsSchema),
      exampleResult: Object.keys(resultSchema).length ? exampleFromSchema({ ...resultSchema, required: Object.keys(obj(resultSchema.properties)) }) : null,
      responses,
    });
  }
  return out;
}

/**
 * A shell-safe curl for one operation, the token taken from $IDEMGATE_TOKEN. The key is minted
 * once into a variable: re-running the curl is then a retry of the same action, not a new one.
 */
export function curlExample(baseUrl: string, op: OperationReference): string {
  const body = JSON.stringify(op.exampleArguments).replaceAll("'", `'\\''`);
  const curl = [
    `curl -X POST '${baseUrl}${op.path}'`,
    `  -H "Authorization: Bearer $IDEMGATE_TOKEN"`,
    `  -H 'Content-Type: application/json'`,
    ...(op.idempotencyKey === "unused" ? [] : [`  -H "Idempotency-Key: $KEY"`]),
    `  -d '${body}'`,
  ].join(" \\\n");
  return op.idempotencyKey === "unused" ? curl : `KEY=$(uuidgen)  # one key per action; send it again on every retry\n${curl}`;
}
