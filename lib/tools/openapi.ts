import { problemSchema, toJsonSchema, toolListSchema, type JsonSchema, type ToolDescription } from "./api-schemas";

export type OpenApiDocument = Record<string, unknown> & { openapi: "3.1.0"; paths: Record<string, Record<string, unknown>> };

const PROBLEM_REF = { $ref: "#/components/schemas/Problem" };

function problemResponse(description: string, headers?: Record<string, unknown>) {
  return { description, ...(headers ? { headers } : {}), content: { "application/problem+json": { schema: PROBLEM_REF } } };
}

/** Every error answer the gateway gives, defined once and referenced by each operation. */
const RESPONSES = {
  BadRequest: problemResponse("invalid arguments (checked against the tool's schema), an invalid Idempotency-Key, or a write without one"),
  Unauthorized: problemResponse("no valid API token"),
  Forbidden: problemResponse("the token may not call this tool"),
  NotFound: problemResponse("no tool by this name"),
  Conflict: problemResponse("a call with this key is still running (retry after Retry-After), or it is stuck and an operator must decide", {
    "Retry-After": { description: "seconds until the running call's lease ends", schema: { type: "integer" } },
  }),
  PayloadTooLarge: problemResponse("the request body is too large"),
  Mismatch: problemResponse("this key was first used with other arguments or another tool"),
  Unavailable: problemResponse("the key store or the audit log is unavailable; nothing was run"),
  Abandoned: problemResponse("the call was abandoned after its side effect; the key stays reserved until an operator decides"),
  ToolFailed: problemResponse("the tool failed before finishing; the key was released, a retry runs again"),
  ToolTimeout: problemResponse("the tool did not answer in time; the key was released, a retry runs again"),
} as const;

const ref = (name: keyof typeof RESPONSES) => ({ $ref: `#/components/responses/${name}` });

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
  const responses: Record<string, unknown> = {
    "200": success,
    "400": ref("BadRequest"),
    "401": ref("Unauthorized"),
    "403": ref("Forbidden"),
    "404": ref("NotFound"),
    ...(write ? { "409": ref("Conflict") } : {}),
    "413": ref("PayloadTooLarge"),
    ...(write ? { "422": ref("Mismatch"), "500": ref("Abandoned") } : {}),
    "502": ref("ToolFailed"),
    "503": ref("Unavailable"),
    "504": ref("ToolTimeout"),
  };
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
          "401": ref("Unauthorized"),
          "403": ref("Forbidden"),
        },
      },
    },
  };
  for (const tool of tools) paths[`/api/v1/tools/${tool.name}/invoke`] = { post: operation(tool) };

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
