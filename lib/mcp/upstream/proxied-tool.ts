import { SdkError, SdkErrorCode, type CallToolResult, type CreateTaskResult, type Tool, type ToolAnnotations } from "@modelcontextprotocol/client";
import { z } from "zod";
import { FinalToolError, NotRunError, OutcomeUnknown, type ToolContext } from "@/lib/idempotency/tool";
import { defineTool, TOOL_NAME_PATTERN, type ArgsSchema, type ToolDefinition } from "@/lib/tools/define-tool";
import type { McpGateSetting } from "@/lib/tools/mcp-server-schema";
import { derivedKey } from "@/lib/tools/upstream";
import { META_KEY_FIELD } from "../key-fields";
import { McpNotSentError } from "./not-sent";
import { takePatterns, withPatterns } from "./schema-patterns";

/** Where a proxied tool comes from; kept on its definition, so /mcp can pass its results through whole. */
export interface McpOrigin {
  server: string;
  /** the tool's own name at its server */
  tool: string;
  annotations: ToolAnnotations | undefined;
  /** how it is gated, and the setting that decided it (the server's or the tool's `gate`) */
  gate: McpGate;
  gateSetting: McpGateSetting;
  /** the server's own JSON Schema, listed as it is */
  inputSchema: Tool["inputSchema"];
  /** what the server declares for display and for its results, listed as it is */
  title: Tool["title"];
  icons: Tool["icons"];
  outputSchema: Tool["outputSchema"];
  /**
   * whether Idemgate could read that schema (validates by it, knows its top-level properties): when
   * not (a top-level allOf, anyOf, $ref, not…), an `idempotency_key` argument may be the tool's own
   */
  schemaRead: boolean;
  /**
   * whether a call may, or must, be task-augmented (`execution.taskSupport`, the 2025-11-25 tasks):
   * as the tool declares it when its server accepts task-augmented `tools/call`, else "forbidden"
   */
  taskSupport: TaskSupport;
  /** the tool's `execution`, listed as it is (its taskSupport as above) */
  execution: Tool["execution"];
  /** the server's connection, for the `tasks/*` requests about the tasks it created */
  target: McpCallTarget;
}

export type TaskSupport = "forbidden" | "optional" | "required";

/** The methods that read or end a task a guarded server created (`tasks/list` is not offered: see tasks.ts). */
export type TaskMethod = "tasks/get" | "tasks/result" | "tasks/cancel";

/** What a proxied tool needs of its server's connection. */
export interface McpCallTarget {
  /** whether a call can be sent now; when not, nothing is sent and the call is "not run" */
  connected(): boolean;
  /**
   * A call's answer: a tool result, or a task the server created for it (a task-augmented call).
   * @throws McpNotSentError when the server certainly did not process the call: it is "not run"
   */
  callTool(params: Record<string, unknown>, timeoutMs: number): Promise<CallToolResult | CreateTaskResult>;
  /** whether the server accepts task-augmented `tools/call` (its `tasks.requests.tools.call` capability) */
  acceptsTasks(): boolean;
  /** a `tasks/*` request about one of its tasks, answered as the server answered it */
  taskRequest(method: TaskMethod, params: { taskId: string }, timeoutMs: number): Promise<Record<string, unknown>>;
}

/** What a caller's `tools/call` asked for beyond the tool's arguments: a task (`params.task`), passed to the run. */
export interface McpCallContext extends ToolContext {
  mcpTask?: { ttl?: number };
}

/** Whether a tools/call answer is a task the server created instead of the tool's result. */
export function isCreateTaskResult(value: unknown): value is CreateTaskResult {
  if (typeof value !== "object" || value === null) return false;
  const task = (value as { task?: unknown }).task;
  return typeof task === "object" && task !== null && typeof (task as { taskId?: unknown }).taskId === "string" && !Array.isArray((value as { content?: unknown }).content);
}

/** A proxied tool's definition with its origin. */
export type ProxiedToolDefinition = ToolDefinition & { mcpOrigin: McpOrigin };

export function mcpOriginOf(tool: ToolDefinition): McpOrigin | null {
  const origin = (tool as Partial<ProxiedToolDefinition>).mcpOrigin;
  return origin && typeof origin.server === "string" ? origin : null;
}

/** The status a stored MCP tool error (`isError: true`) is kept under: the tool understood and refused. */
export const MCP_TOOL_ERROR_STATUS = 422;

/**
 * `<server>.<tool>` with the tool's name made to fit Idemgate's tool names (lower case; other
 * characters become `_`); null when it cannot be made to fit.
 */
export function proxiedName(server: string, tool: string): string | null {
  let local = tool
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, "_");
  if (!/^[a-z]/.test(local)) local = `t_${local}`;
  const name = `${server}.${local}`;
  return TOOL_NAME_PATTERN.test(name) && name.length <= 128 ? name : null;
}

export type McpGate = "read" | "idempotent" | "write";

/**
 * How a tool is gated (DESIGN.md § MCP; the settings: mcp-server-schema.ts). By its annotations:
 * `readOnlyHint` → a read, never gated; `idempotentHint` → passed through without a key (the
 * resource carries the idempotency), and recorded in the audit log; anything else → a write, gated
 * like every other write. `always` makes every tool a write; `never` passes every tool that is not
 * `readOnlyHint` through, recorded.
 */
export function gateOf(annotations: ToolAnnotations | undefined, setting: McpGateSetting = "by-annotations"): McpGate {
  if (setting === "always") return "write";
  if (annotations?.readOnlyHint === true) return "read";
  if (setting === "never" || annotations?.idempotentHint === true) return "idempotent";
  return "write";
}

/** The `gate` that applies to one of a server's tools: the tool's own setting, else the server's. */
export function gateSettingOf(server: GatedServer, tool: string): McpGateSetting {
  return (Object.hasOwn(server.tools ?? {}, tool) ? server.tools![tool].gate : undefined) ?? server.gate ?? "by-annotations";
}

/** What a proxied tool needs of its server's declaration. */
export interface GatedServer {
  name: string;
  timeoutMs: number;
  gate?: McpGateSetting;
  tools?: Record<string, { gate: McpGateSetting }>;
}

/** The server's schema as zod; its `pattern`s run with a linear-time engine (schema-patterns.ts), never RegExp. */
function argsSchema(inputSchema: Tool["inputSchema"]): { schema: ArgsSchema; read: boolean } {
  try {
    const { schema: withoutPatterns, patterns } = takePatterns(inputSchema);
    const schema = z.fromJSONSchema(withoutPatterns as Parameters<typeof z.fromJSONSchema>[0]);
    if (schema instanceof z.ZodObject) return { schema: withPatterns(schema, patterns), read: true };
  } catch {
    // a schema zod cannot read: the server validates its own arguments
  }
  return { schema: z.looseObject({}), read: false };
}

/**
 * A listed tool of another MCP server as an Idemgate tool. A write's call carries the key derived
 * from the caller's scope and key (as `params.idempotencyKey` and in `_meta`), so a server that
 * honours keys can deduplicate too. Outcome classes: a result is done (one with `isError` is a final
 * result, stored and replayed); a call the server certainly did not process (not connected, a
 * refused connection, a session it no longer knows: not-sent.ts) is not run, and its key is given
 * back; a timeout or any failure after the request may have been processed is unknown. What the server said when it
 * failed (its error text may name its internals) is kept for operators (key page, audit log);
 * callers read a generic note, and the server's state is on the status page.
 */
export function proxiedTool(server: GatedServer, listed: Tool, target: McpCallTarget): ProxiedToolDefinition | null {
  const name = proxiedName(server.name, listed.name);
  if (!name) return null;
  const gateSetting = gateSettingOf(server, listed.name);
  const gate = gateOf(listed.annotations, gateSetting);
  const timeoutMs = server.timeoutMs;
  const description = listed.description?.trim() || listed.title || `${listed.name} of the MCP server ${server.name}`;
  const args = argsSchema(listed.inputSchema);
  const declaredSupport = listed.execution?.taskSupport;
  const taskSupport: TaskSupport = target.acceptsTasks() && (declaredSupport === "optional" || declaredSupport === "required") ? declaredSupport : "forbidden";
  const definition = defineTool({
    name,
    // An idempotent tool is passed through like a read (repeating it changes nothing more), and audited.
    kind: gate === "write" ? "write" : "read",
    audited: gate === "idempotent",
    description,
    schema: args.schema,
    // a call still waiting for its answer must never look stuck
    leaseMs: timeoutMs + 30_000,
    runTimeoutMs: timeoutMs,
    async run(args, ctx: McpCallContext) {
      if (!target.connected()) {
        throw new NotRunError(`the MCP server ${server.name} is not connected; nothing was sent`);
      }
      const params: Record<string, unknown> = { name: listed.name, arguments: args };
      if (ctx.key) {
        const key = derivedKey(ctx.scope, ctx.key);
        params.idempotencyKey = key;
        params._meta = { [META_KEY_FIELD]: key };
      }
      // A task-augmented call: the server answers with a task it created (its handle is the result
      // stored under the key, so a retry gets the same task instead of a second one)
      if (ctx.mcpTask && taskSupport !== "forbidden") params.task = ctx.mcpTask;
      let result: CallToolResult | CreateTaskResult;
      try {
        result = await target.callTool(params, timeoutMs);
      } catch (err) {
        if (err instanceof McpNotSentError) throw new NotRunError(`the MCP server ${server.name} did not process the call: ${err.reason}; nothing was run`);
        if (err instanceof SdkError && err.code === SdkErrorCode.RequestTimeout) {
          throw new OutcomeUnknown(`no answer from the MCP server ${server.name} within ${timeoutMs} ms`, true);
        }
        throw new OutcomeUnknown(`the call to the MCP server ${server.name} failed`, false, err instanceof Error ? err.message : String(err));
      }
      if (isCreateTaskResult(result)) return { status: 200, body: result };
      if (result.isError && gate === "write") throw new FinalToolError(MCP_TOOL_ERROR_STATUS, result);
      return { status: result.isError ? MCP_TOOL_ERROR_STATUS : 200, body: result };
    },
  });
  return Object.assign(definition, { mcpOrigin: { server: server.name, tool: listed.name, annotations: listed.annotations, gate, gateSetting, inputSchema: listed.inputSchema, title: listed.title, icons: listed.icons, outputSchema: listed.outputSchema, schemaRead: args.read, taskSupport, execution: listed.execution ? { ...listed.execution, ...(listed.execution.taskSupport ? { taskSupport } : {}) } : undefined, target } });
}
