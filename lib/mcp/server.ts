import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import packageJson from "@/package.json";
import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import type { HeaderSource } from "@/lib/http/answer";
import { problemAnswer } from "@/lib/http/problem";
import { readJsonBody } from "@/lib/http/read-body";
import { tokenPrincipal } from "@/lib/auth/token-guard";
import type { Runtime } from "@/lib/server/runtime";
import { callTool } from "./call-tool";
import { CallToolWithKeySchema } from "./call-tool-request";
import { CancelTaskSchema, forwardTaskRequest, GetTaskResultRequestSchema, GetTaskSchema } from "./tasks";
import { listMcpTools, META_KEY_FIELD } from "./tools";

export const MCP_PATH = "/mcp";

const INSTRUCTIONS =
  "Idemgate runs each write tool's action exactly once per idempotency key. Mint one key per logical action (a UUID) before the first " +
  `attempt and send it as tools/call \`params.idempotencyKey\` (or \`_meta["${META_KEY_FIELD}"]\`) on that attempt and every retry of it: ` +
  "a retry gets the first call's result and the action does not run again. A key in the `idempotency_key` argument counts too, but is " +
  "advisory: identical calls within a short window count as one action whatever key they carry. Read tools need no key.";

// One validator for every request's server: the SDK would build a new Ajv instance per server.
let validator: AjvJsonSchemaValidator | undefined;

/** An MCP server for one HTTP request, for one caller: stateless, like the gateway itself. */
export function createMcpServer(runtime: Runtime, caller: { principal: TokenPrincipal; headers: HeaderSource }): Server {
  validator ??= new AjvJsonSchemaValidator();
  const server = new Server(
    { name: "idemgate", version: packageJson.version },
    {
      capabilities: {
        tools: { listChanged: false },
        // task-augmented tools/call, for a guarded server's tools that run as tasks (tasks.ts);
        // no tasks/list: Idemgate keeps no list of a scope's tasks
        tasks: { cancel: {}, requests: { tools: { call: {} } } },
      },
      instructions: INSTRUCTIONS,
      jsonSchemaValidator: validator,
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: listMcpTools(runtime.registry) }));
  server.setRequestHandler(CallToolWithKeySchema, async (request) => callTool(request.params, caller, runtime));
  server.setRequestHandler(GetTaskSchema, async (request) => forwardTaskRequest("tasks/get", request.params, caller, runtime) as never);
  server.setRequestHandler(GetTaskResultRequestSchema, async (request) => forwardTaskRequest("tasks/result", request.params, caller, runtime) as never);
  server.setRequestHandler(CancelTaskSchema, async (request) => forwardTaskRequest("tasks/cancel", request.params, caller, runtime) as never);
  return server;
}

/**
 * The MCP endpoint (Streamable HTTP, stateless): every POST carries the caller's API token and is
 * answered by a server and transport of its own, so any server process can answer any request and
 * nothing is kept between them. There is no server-initiated stream and no session to end: GET and
 * DELETE are 405, as the transport's specification allows.
 */
export async function handleMcpRequest(request: Request, runtime: Runtime | (() => Promise<Runtime>)): Promise<Response> {
  if (request.method !== "POST") {
    return jsonRpcError(405, -32000, "Method not allowed: this MCP endpoint is stateless; send each message as a POST", { Allow: "POST" });
  }
  let rt: Runtime;
  let principal: TokenPrincipal;
  try {
    rt = typeof runtime === "function" ? await runtime() : runtime;
    principal = await tokenPrincipal(request.headers, rt);
  } catch (err) {
    const answer = problemAnswer(err, MCP_PATH);
    return new Response(answer.body, { status: answer.status, headers: answer.headers });
  }
  // The body is read as the gateway reads it: a size bound, no deep nesting, no integers JSON
  // would round (they would change a charge's amount without anyone noticing).
  let body: unknown;
  try {
    body = await readJsonBody(request);
  } catch (err) {
    const { status, code } = err as { status?: unknown; code?: unknown };
    const rpcCode = code === "invalid_json" ? -32700 : code === "invalid_arguments" ? -32602 : -32000;
    return jsonRpcError(typeof status === "number" ? status : 400, rpcCode, err instanceof Error ? err.message : String(err));
  }
  if (body === undefined) return jsonRpcError(400, -32700, "Parse error: the body is empty; send a JSON-RPC message");

  const server = createMcpServer(rt, { principal, headers: request.headers });
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  try {
    await server.connect(transport);
    const response = await transport.handleRequest(request, { parsedBody: body });
    // JSON responses are complete once handleRequest resolves: nothing more will be written
    const headers = new Headers(response.headers);
    headers.set("Cache-Control", "no-store");
    return new Response(response.body, { status: response.status, headers });
  } finally {
    await server.close().catch(() => {});
  }
}

function jsonRpcError(status: number, code: number, message: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }), {
    status,
    headers: { "Content-Type": "application/json", "Cache-Control": "no-store", ...headers },
  });
}
