import { problemInfo } from "@/lib/http/problem";
import { problemSchema, toJsonSchema, toolListSchema, type JsonSchema, type ToolDescription } from "./api-schemas";

export type OpenApiDocument = Record<string, unknown> & { openapi: "3.1.0"; paths: Record<string, Record<string, unknown>> };

const PROBLEM_REF = { $ref: "#/components/schemas/Problem" };

/**
 * The problem types (`/problems/<code>`) each operation can answer with. Their statuses, titles and
 * headers are read from the one problem table (lib/http/problem.ts) that the gateway answers from,
 * so the document cannot state another status or another Retry-After than the gateway sends.
 */
export const OPERATION_PROBLEMS = {
  write: [
    "missing_key", "invalid_key", "invalid_arguments", "invalid_json", "invalid_header", "unauthorized", "forbidden", "unknown_tool",
    "conflict", "stuck", "outcome_unknown", "payload_too_large", "unsupported_media_type", "mismatch", "abandoned", "internal",
    "tool_failed", "unavailable",
  ],
  read: ["invalid_arguments", "invalid_json", "invalid_header", "unauthorized", "forbidden", "unknown_tool", "payload_too_large", "unsupported_media_type", "internal", "unavailable"],
  list: ["unauthorized", "forbidden"],
} as const satisfies Record<string, readonly string[]>;

type OperationKind = keyof typeof OPERATION_PROBLEMS;

/** A header's schema: the exact value the gateway sends. */
function headerSchema(value: string) {
  return /^\d+$/.test(value) ? { type: "integer", const: Number(value) } : { type: "string", const: value };
}

/** status -> the problem types of this operation answered with it, in table order */
function problemsByStatus(kind: OperationKind): Map<number, string[]> {
  const byStatus = new Map<number, string[]>();
  for (const code of OPERATION_PROBLEMS[kind]) {
    const info = problemInfo(code);
    if (!info) throw new Error(`no problem type ${code} in lib/http/problem.ts`);
    for (const status of [info.status, ...(info.otherStatuses ?? [])]) byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return new Map([...byStatus].sort(([a], [b]) => a - b));
}

/** One error response per status and operation kind, each listing its problem types and their headers. */
function errorResponses(kind: OperationKind): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [status, codes] of problemsByStatus(kind)) {
    const headers: Record<string, unknown> = {};
    for (const code of codes) {
      for (const [name, h] of Object.entries(problemInfo(code)!.headers ?? {})) {
        headers[name] = { description: codes.length > 1 ? `with /problems/${code}: ${h.description}` : h.description, schema: headerSchema(h.value) };
      }
    }
    out[`${kind}${status}`] = {
      description: codes.map((c) => `${problemInfo(c)!.title} (/problems/${c})`).join("; "),
      ...(Object.keys(headers).length ? { headers } : {}),
      content: { "application/problem+json": { schema: PROBLEM_REF } },
    };
  }
  return out;
}

const RESPONSES = Object.assign({}, ...(Object.keys(OPERATION_PROBLEMS) as OperationKind[]).map(errorResponses)) as Record<string, unknown>;

/** The error responses of one kind of operation, by status, as references to components.responses. */
function errorRefs(kind: OperationKind): Record<string, unknown> {
  return Object.fromEntries([...problemsByStatus(kind).keys()].map((status) => [String(status), { $ref: `#/components/responses/${kind}${status}` }]));
}

function parameters(tool: ToolDescription): unknown[] {
  const session = {
    name: "Idemgate-Session",
    in: "header",
    required: false,
    description: "the caller's run or conversation; recorded with every execution and suppression",
    schema: { type: "string", maxLength: 255 },
  };
  if (tool.kind === "read") return [session];
  const key = {
    name: "Idempotency-Key",
    in: "header",
    required: tool.idempotencyKey === "required",
    description:
      tool.idempotencyKey === "required"
        ? "names this logical action: one key per action, the same key on every retry of it"
        : `names this logical action; without it, identical calls within ${tool.fallbackTtlMs} ms are deduplicated by their arguments`,
    schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x20-\\x7e]+$" },
  };
  return [key, session];
}

function operation(tool: ToolDescription) {
  const write = tool.kind === "write";
  const hasRequired = Array.isArray(tool.argumentsSchema.required) && tool.argumentsSchema.required.length > 0;
  const success = {
    description: write ? "the result: of this execution, or the stored one on a replay" : "the result",
    ...(write
      ? { headers: { "Idempotent-Replayed": { description: "`true` when the stored result of an earlier call was returned", schema: { type: "string", enum: ["true"] } } } }
      : {}),
    content: { "application/json": { schema: tool.resultSchema ?? {} } },
  };
  const responses: Record<string, unknown> = { "200": success, ...errorRefs(write ? "write" : "read") };
  if (write) {
    responses.default = {
      description: "a final error of the tool itself (e.g. 402 card declined): stored and replayed like a result",
      content: { "application/json": { schema: {} }, "application/problem+json": { schema: PROBLEM_REF } },
    };
  }
  return {
    operationId: `invoke_${tool.name.replaceAll(".", "_")}`,
    summary: tool.description,
    tags: [tool.name.split(".")[0]],
    security: [{ bearer: [] }],
    parameters: parameters(tool),
    requestBody: { required: hasRequired, content: { "application/json": { schema: tool.argumentsSchema } } },
    responses,
    "x-idemgate": {
      kind: tool.kind,
      ttlMs: tool.ttlMs,
      leaseMs: tool.leaseMs,
      stuckPolicy: tool.stuckPolicy,
      fallbackTtlMs: tool.fallbackTtlMs,
      source: tool.source,
    },
  };
}

/** OpenAPI 3.1: one invoke path per tool plus the tool list; every schema comes from zod. */
export function buildOpenApiDocument(tools: readonly ToolDescription[], baseUrl?: string): OpenApiDocument {
  const paths: Record<string, Record<string, unknown>> = {
    "/api/v1/tools": {
      get: {
        operationId: "list_tools",
        summary: "The configured tools, their policies and argument schemas",
        tags: ["tools"],
        security: [{ bearer: [] }],
        responses: {
          "200": { description: "the tools", content: { "application/json": { schema: toJsonSchema(toolListSchema, "output") } } },
          ...errorRefs("list"),
        },
      },
    },
  };
  // a tool run by its caller is never invoked through the gateway
  for (const tool of tools) if (tool.source !== "client") paths[`/api/v1/tools/${tool.name}/invoke`] = { post: operation(tool) };

  return {
    openapi: "3.1.0",
    info: {
      title: "Idemgate gateway",
      version: "1",
      description: "Invoke tools exactly once per Idempotency-Key. A retry with the same key gets the stored result and `Idempotent-Replayed: true`.",
    },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    ...(baseUrl ? { servers: [{ url: baseUrl.replace(/\/+$/, "") }] } : {}),
    paths,
    components: {
      schemas: { Problem: toJsonSchema(problemSchema, "output") as JsonSchema },
      responses: RESPONSES,
      securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "an API token; its scope is the namespace of the keys" } },
    },
  };
}
