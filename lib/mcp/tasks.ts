import { ProtocolError, ProtocolErrorCode as ErrorCode, RELATED_TASK_META_KEY } from "@modelcontextprotocol/server";
import type { Runtime } from "@/lib/server/runtime";
import { JsonRpcError } from "./call-tool-request";
import type { McpCaller } from "./call-tool";
import { mcpOriginOf, type TaskMethod } from "./upstream/proxied-tool";
import { taskHandles } from "./upstream/task-handle";

/** How long a `tasks/*` request to a guarded server may take when its tool declares no timeout. */
const TASK_REQUEST_TIMEOUT_MS = 60_000;

export function readTaskParams(params: unknown): { taskId: string } {
  const taskId = typeof params === "object" && params !== null ? (params as { taskId?: unknown }).taskId : undefined;
  if (typeof taskId !== "string" || taskId === "") throw new JsonRpcError(ErrorCode.InvalidParams, "needs params.taskId: the taskId a task-augmented tools/call answered");
  return { taskId };
}

/**
 * `tasks/get`, `tasks/result` and `tasks/cancel` for a task that a guarded MCP server created for a
 * task-augmented `tools/call`: the handle (task-handle.ts) is opened for the caller's scope, the
 * request goes to that server with its own task id, and the answer comes back under the handle.
 * Nothing here is gated or stored: these requests read or end a task; they do not start one.
 * A handle of another scope, or one this server did not make, is an unknown task (-32602), as is one
 * whose tool is no longer served. `tasks/list` is not offered: the guarded server holds every
 * tenant's tasks under one connection, and Idemgate keeps no list of them per scope.
 */
export async function forwardTaskRequest(method: TaskMethod, params: { taskId: string }, caller: McpCaller, runtime: Runtime): Promise<Record<string, unknown>> {
  const handle = params.taskId;
  const target = taskHandles(runtime.config).open(caller.principal.scope, handle);
  const tool = target && runtime.registry.has(target.tool) ? runtime.registry.get(target.tool) : null;
  const origin = tool ? mcpOriginOf(tool) : null;
  if (!target || !tool || !origin) throw new JsonRpcError(ErrorCode.InvalidParams, `Unknown task: ${handle}`);
  if (!origin.target.connected()) {
    throw new JsonRpcError(ErrorCode.InternalError, `the MCP server ${origin.server} that runs this task is not connected now; ask again later`);
  }
  let answer: Record<string, unknown>;
  try {
    answer = await origin.target.taskRequest(method, { taskId: target.taskId }, tool.runTimeoutMs ?? TASK_REQUEST_TIMEOUT_MS);
  } catch (err) {
    // the server's own words may name its internals: callers get its error code, operators its log
    if (err instanceof ProtocolError) throw new JsonRpcError(err.code, `the MCP server ${origin.server} refused ${method} for this task (error ${err.code})`);
    throw new JsonRpcError(ErrorCode.InternalError, `the MCP server ${origin.server} did not answer ${method} for this task; ask again`);
  }
  return underHandle(method, answer, handle);
}

/** The server's answer with its task id replaced by Idemgate's handle. */
function underHandle(method: TaskMethod, answer: Record<string, unknown>, handle: string): Record<string, unknown> {
  if (method !== "tasks/result") return { ...answer, taskId: handle };
  const meta = answer._meta;
  if (typeof meta !== "object" || meta === null || !(RELATED_TASK_META_KEY in meta)) return answer;
  return { ...answer, _meta: { ...meta, [RELATED_TASK_META_KEY]: { taskId: handle } } };
}
