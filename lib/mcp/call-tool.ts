import { ProtocolErrorCode as ErrorCode, RELATED_TASK_META_KEY, type CallToolResult, type CreateTaskResult } from "@modelcontextprotocol/server";
import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import { idempotencyKeyHeader, keySourceHeader, sessionHeader, waitPreference } from "@/lib/gateway/gateway-request";
import type { InvokeResult, KeySource } from "@/lib/idempotency/engine";
import { InvalidKeyError, isIdemgateError } from "@/lib/idempotency/errors";
import { publicOutcomeNote } from "@/lib/idempotency/outcome-note";
import { isFinalToolError, isNotRunError, isOutcomeUnknown } from "@/lib/idempotency/tool";
import type { HeaderSource } from "@/lib/http/answer";
import { problemAnswer, type ProblemBody } from "@/lib/http/problem";
import { isProblemCode, PROBLEMS } from "@/lib/problems/problems";
import type { Runtime } from "@/lib/server/runtime";
import { JsonRpcError, type CallParams } from "./call-tool-request";
import { advertisesKeyArgument, KEY_ARGUMENT, META_KEY_FIELD } from "./tools";
import { isCreateTaskResult, mcpOriginOf, type McpCallContext } from "./upstream/proxied-tool";
import { taskHandles } from "./upstream/task-handle";

/** How long a duplicate of a running call is held for its result without a `Prefer: wait`, as `Prefer: wait=10` would (DESIGN.md). */
export const MCP_WAIT_MS = 10_000;


/** Who calls and how: the API token's principal and the HTTP request's headers. */
export interface McpCaller {
  principal: TokenPrincipal;
  headers: HeaderSource;
}

/** The `_meta` of a result: what Idemgate did with the call. */
export const RESULT_META_FIELD = "io.idemgate/result";

/** The `_meta` of a result that names a task an earlier call with the key created, instead of the tool's result. */
export const TASK_META_FIELD = "io.idemgate/task";

const HOW_TO_SEND_A_KEY =
  `Send one as tools/call \`params.idempotencyKey\` (or \`params._meta["${META_KEY_FIELD}"]\`, or the HTTP request's Idempotency-Key header), ` +
  `or as the \`${KEY_ARGUMENT}\` argument: one key per logical action, the same key on every retry of that action.`;

/**
 * `tools/call` through the engine, exactly as the HTTP gateway calls it (same scope, key rules,
 * audit), with transport `mcp`. Answers are MCP tool results: the tool's JSON body as text (and as
 * `structuredContent` when it is an object); refusals and errors are tool errors (`isError`) with
 * the gateway's problem body. An unknown tool is a protocol error (JSON-RPC invalid params).
 */
export async function callTool(params: CallParams, caller: McpCaller, runtime: Runtime): Promise<CallToolResult | CreateTaskResult> {
  // one registry for the whole call: a reload swaps runtime.registry, and a call already running
  // finishes under the definition it started with
  const registry = runtime.registry;
  if (!registry.has(params.name)) throw new JsonRpcError(ErrorCode.InvalidParams, `Unknown tool: ${params.name}`);
  const tool = registry.get(params.name);
  const task = taskRequest(params, mcpOriginOf(tool)?.taskSupport ?? "forbidden");
  let waitSeconds: number | null = null;
  let result: InvokeResult;
  try {
    const args: Record<string, unknown> = { ...(params.arguments ?? {}) };
    const modelKey = advertisesKeyArgument(tool) ? takeKeyArgument(args) : undefined;
    let key: string | null = null;
    let keySource: KeySource = "orchestrator";
    if (tool.kind === "write") {
      const orchestratorKey = keyValue(params.idempotencyKey, "params.idempotencyKey") ?? keyValue(params._meta?.[META_KEY_FIELD], `_meta["${META_KEY_FIELD}"]`) ?? idempotencyKeyHeader(caller.headers);
      if (orchestratorKey !== null) {
        key = orchestratorKey;
        keySource = keySourceHeader(caller.headers, caller.principal);
      } else if (modelKey !== undefined) {
        key = modelKey;
        keySource = "model";
      }
      // `Prefer: wait=0` asks for an answer at once (a duplicate of a running call is refused, not held)
      waitSeconds = waitPreference(caller.headers) ?? MCP_WAIT_MS / 1000;
    }
    const session = sessionHeader(caller.headers);
    // a tool run by its caller: a tool error naming how it runs (runs_in_client)
    const runner = registry.runnerFor(tool, runtime.db.prisma);
    const run = task ? (a: unknown, ctx: McpCallContext) => runner(a, { ...ctx, mcpTask: task } as McpCallContext) : runner;
    const parsed = registry.parseArgs(tool, args);
    result = await runtime.engine.invoke(tool, run, {
      scope: caller.principal.scope,
      key,
      args: parsed,
      session,
      caller: caller.principal.tokenId,
      keySource,
      waitMs: waitSeconds === null ? undefined : waitSeconds * 1000,
      transport: "mcp",
    });
  } catch (err) {
    return withoutStructuredError(errorResult(err, tool.name, waitSeconds), mcpOriginOf(tool)?.outputSchema !== undefined);
  }
  const stored = mcpOriginOf(tool) ? jsonObject(result.body) : null;
  if (stored && isCreateTaskResult(stored)) {
    const handle = taskHandles(runtime.config).handle(caller.principal.scope, { tool: tool.name, taskId: stored.task.taskId });
    return task ? taskResult(stored, handle, result) : taskPointer(stored, handle, result);
  }
  if (task) {
    // The SDK's client takes a task-augmented call's answer for a task: a result stored by a call
    // without one cannot be passed off as a task. Nothing ran now; the caller learns how to read it.
    throw new JsonRpcError(
      ErrorCode.InvalidParams,
      (result.kind === "executed"
        ? `${tool.name} ran, but its server answered with the result instead of a task; the result is stored under this idempotency key. `
        : `the first call with this idempotency key ran ${tool.name} without a task and its result is stored; nothing was run again. `) +
        "Call again with the same key and without params.task to get that result (it will not run again).",
    );
  }
  return toolResult(result, mcpOriginOf(tool) !== null);
}

/**
 * `params.task` (a task-augmented call, MCP 2025-11-25), checked against the tool's
 * `execution.taskSupport` before anything runs: a task for a tool that never runs as one, or no
 * task for a tool that only runs as one, is refused with -32601 as the specification says.
 */
function taskRequest(params: CallParams, support: "forbidden" | "optional" | "required"): { ttl?: number } | undefined {
  const task = params.task;
  if (task === undefined) {
    if (support === "required") throw new JsonRpcError(ErrorCode.MethodNotFound, `${params.name} runs only as a task: send params.task (e.g. {"ttl": 60000}); nothing was run`);
    return undefined;
  }
  if (typeof task !== "object" || task === null || Array.isArray(task)) throw new JsonRpcError(ErrorCode.InvalidParams, "tools/call params.task must be an object, e.g. {\"ttl\": 60000}");
  const ttl = (task as { ttl?: unknown }).ttl;
  if (ttl !== undefined && (typeof ttl !== "number" || !Number.isSafeInteger(ttl) || ttl < 0)) {
    throw new JsonRpcError(ErrorCode.InvalidParams, "tools/call params.task.ttl must be a whole number of milliseconds");
  }
  if (support === "forbidden") throw new JsonRpcError(ErrorCode.MethodNotFound, `${params.name} does not run as a task: call it without params.task; nothing was run`);
  return ttl === undefined ? {} : { ttl };
}

/** What Idemgate did with the call, in a result's `_meta`. */
function resultMeta(result: InvokeResult): Record<string, unknown> {
  return result.kind === "read"
    ? { status: result.status, ...(result.executionId ? { executionId: result.executionId } : {}) }
    : {
        status: result.status,
        key: result.key,
        replayed: result.kind === "replayed",
        ...(result.kind === "executed" ? { executionId: result.executionId } : { executionId: result.record.executionId }),
      };
}

/** The task a guarded server created, under Idemgate's handle for it (task-handle.ts). */
function taskResult(stored: CreateTaskResult, handle: string, result: InvokeResult): CreateTaskResult {
  return { ...stored, task: { ...stored.task, taskId: handle }, _meta: { ...stored._meta, [RESULT_META_FIELD]: resultMeta(result) } };
}

/**
 * A call without `params.task` whose key's stored result is a task (an earlier call with this key
 * created it): a tool result naming that task, so the action is not started a second time and the
 * caller can follow the first one with tasks/get and tasks/result.
 */
function taskPointer(stored: CreateTaskResult, handle: string, result: InvokeResult): CallToolResult {
  const task = { ...stored.task, taskId: handle };
  return {
    content: [
      {
        type: "text",
        text: `This action was started as the task ${handle} (status when created: ${task.status}). Read its status with tasks/get and its result with tasks/result, with that taskId.`,
      },
    ],
    // not structuredContent: that must match the tool's outputSchema, which describes its results
    _meta: { [RELATED_TASK_META_KEY]: { taskId: handle }, [TASK_META_FIELD]: task, [RESULT_META_FIELD]: resultMeta(result) },
  };
}

/** Removes the advisory key argument; undefined when the model sent none. */
function takeKeyArgument(args: Record<string, unknown>): string | undefined {
  if (!Object.hasOwn(args, KEY_ARGUMENT)) return undefined;
  const value = args[KEY_ARGUMENT];
  delete args[KEY_ARGUMENT];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string") throw new InvalidKeyError(`the ${KEY_ARGUMENT} argument must be a string`);
  return value;
}

function keyValue(value: unknown, where: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string") throw new InvalidKeyError(`${where} must be a string`);
  return value;
}

function toolResult(result: InvokeResult, proxied: boolean): CallToolResult {
  const structured = jsonObject(result.body);
  let out: CallToolResult;
  if (proxied && structured && Array.isArray(structured.content)) {
    // another MCP server's result (stored as it came): passed on whole, content, isError and all
    out = { ...(structured as CallToolResult) };
  } else {
    out = { content: [{ type: "text", text: result.body }] };
    if (structured) out.structuredContent = structured;
    // a final error (a declined card) is the action's result, stored and replayed like any other
    if (result.status >= 400) out.isError = true;
  }
  out._meta = { ...out._meta, [RESULT_META_FIELD]: resultMeta(result) };
  return out;
}

function jsonObject(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * A guarded tool that declares an `outputSchema` gets Idemgate's refusals and failures as text only:
 * SDK v1 clients check an error's `structuredContent` against that schema too, and a problem body
 * never matches it, so the caller would get a protocol error (-32602) instead of the refusal.
 */
function withoutStructuredError(result: CallToolResult, declaresOutputSchema: boolean): CallToolResult {
  if (!declaresOutputSchema) return result;
  const { structuredContent: _dropped, ...rest } = result;
  return rest;
}

/** A refusal or failure as an MCP tool error: the gateway's problem body, its detail worded for MCP. */
function errorResult(err: unknown, tool: string, waitSeconds: number | null): CallToolResult {
  if (isFinalToolError(err)) {
    // a read tool's final answer (writes store theirs and return them as results)
    const text = JSON.stringify(err.body ?? null);
    const structured = jsonObject(text);
    return { content: [{ type: "text", text }], ...(structured ? { structuredContent: structured } : {}), isError: true };
  }
  if (isNotRunError(err) || isOutcomeUnknown(err)) {
    // thrown by a read tool (writes' are the engine's errors): it did not answer
    const { title, retry } = PROBLEMS.tool_failed;
    const body: ProblemBody = isNotRunError(err)
      ? { type: "/problems/tool_failed", title, status: 502, detail: err.message, retry }
      : { type: "/problems/tool_failed", title, status: err.timedOut ? 504 : 502, detail: err.note, retry };
    return { content: [{ type: "text", text: JSON.stringify(body) }], structuredContent: body, isError: true };
  }
  const answer = problemAnswer(err, "/mcp");
  const body = JSON.parse(answer.body) as ProblemBody;
  const code = body.type.replace(/^\/problems\//, "");
  // an MCP client has no Retry-After header and no client library's table: the problem table's
  // retry rule goes in the body (yes, after Retry-After, no, with changes)
  if (isProblemCode(code)) body.retry = PROBLEMS[code].retry;
  switch (code) {
    case "missing_key":
      body.detail = `${tool} changes something and needs an idempotency key naming this action; nothing was run. ${HOW_TO_SEND_A_KEY}`;
      break;
    case "conflict":
      body.detail =
        `A call with this idempotency key is still in progress${waitSeconds ? ` (waited ${waitSeconds} s for it)` : ""}; nothing was run again. ` +
        `Call again later with the same key to get its result; do not use a new key for the same action.`;
      break;
    case "tool_paused":
      body.detail =
        `${tool} is paused by an operator${typeof body.reason === "string" ? ` (${body.reason})` : ""}: nothing was run and nothing was reserved. ` +
        `Do not do this action another way; call again with the same key once the tool is resumed.`;
      break;
    case "outcome_unknown":
      body.detail =
        `The outcome of this action is unknown${outcomeNote(err)}: it may have happened. The key is held: calling again with it will not run the action ` +
        `until the tool's status probe or an operator decides whether it happened. Do not retry it with a new key.`;
      break;
  }
  return { content: [{ type: "text", text: JSON.stringify(body) }], structuredContent: body, isError: true };
}

/** The caller's note: the first call's (its public note) or the held key's (as a caller may read it). */
function outcomeNote(err: unknown): string {
  const note = isIdemgateError(err, "outcome_unknown") ? err.note : "";
  return note ? ` (${publicOutcomeNote(note)})` : "";
}
