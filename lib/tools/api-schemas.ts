import { z } from "zod";

export type JsonSchema = Record<string, unknown>;

/**
 * JSON Schema of what a caller sends (`io: "input"`: optional fields with defaults stay optional).
 * The `$schema` line is dropped: the documents embedding these schemas declare their dialect.
 */
export function toJsonSchema(schema: z.ZodType, io: "input" | "output" = "input"): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: "any", override: simplify }) as JsonSchema;
  return rest;
}

/**
 * Leaves out what zod adds for its own exactness but only makes the schema harder to read for the
 * people and models writing arguments: the safe-integer bounds of every integer, and the long
 * regular expressions behind formats such as `date-time` and `email` (the format says it).
 */
function simplify({ jsonSchema }: { jsonSchema: Record<string, unknown> }): void {
  if (jsonSchema.minimum === Number.MIN_SAFE_INTEGER) delete jsonSchema.minimum;
  if (jsonSchema.maximum === Number.MAX_SAFE_INTEGER) delete jsonSchema.maximum;
  if (typeof jsonSchema.format === "string" && typeof jsonSchema.pattern === "string") delete jsonSchema.pattern;
}

/** RFC 9457 problem details: every gateway error body. Extension members are allowed. */
export const problemSchema = z
  .looseObject({
    type: z.string().describe("a URI naming the kind of problem"),
    title: z.string(),
    status: z.number().int(),
    detail: z.string().optional(),
    instance: z.string().optional(),
  })
  .describe("RFC 9457 problem details");

const jsonSchema = z.record(z.string(), z.unknown()).describe("JSON Schema (draft 2020-12)");

/** A tool as GET /api/v1/tools lists it; the TypeScript type is derived from this schema. */
export const toolDescriptionSchema = z.object({
  name: z.string(),
  kind: z.enum(["read", "write"]),
  description: z.string(),
  ttlMs: z.number().int().describe("how long a result is replayed"),
  leaseMs: z.number().int().describe("how long a running call's reservation is trusted"),
  stuckPolicy: z.enum(["block", "takeover"]),
  fallbackTtlMs: z.number().int().nullable().describe("keyless calls are deduplicated by their arguments for this long; null: keyless writes are refused"),
  idempotencyKey: z.enum(["required", "optional", "unused"]),
  source: z
    .enum(["in_process", "upstream", "client", "mcp"])
    .describe("where the tool runs: in Idemgate's process, at an HTTP service it forwards to, in the caller's process (guarded over the reservation API), or at a guarded MCP server it forwards to"),
  argumentsSchema: jsonSchema,
  resultSchema: jsonSchema.nullable(),
});

export type ToolDescription = z.output<typeof toolDescriptionSchema>;

/** A write tool's pause as GET /api/v1/tools lists it (who paused it stays in the console and the operator log). */
export const toolPauseSchema = z
  .object({
    reason: z.string().describe("why it was paused"),
    pausedAt: z.string().nullable().describe("when an operator paused it; null for a tool declared paused in the configuration file"),
    source: z.enum(["operator", "config"]).describe("operator: paused from the console, the API or the command line; config: `paused: true` in the configuration file"),
  })
  .nullable()
  .describe(
    "while set, new first executions are refused (503 tool_paused) and nothing is reserved; done keys still replay. Null for a read and for a write tool that is not paused; also null while a server that has just started cannot yet read the paused tools from its audit database, when it answers new calls 503 unavailable",
  );

export const toolListSchema = z.object({ tools: z.array(toolDescriptionSchema.extend({ paused: toolPauseSchema })) });

export type ToolListing = z.output<typeof toolListSchema>;
