import {
  createMcpHandler,
  isLegacyRequest,
  ProtocolError,
  type Server,
  WebStandardStreamableHTTPServerTransport,
  type AuthInfo,
  type McpHttpHandler,
} from "@modelcontextprotocol/server";
import { z } from "zod";
import packageJson from "@/package.json";
import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import type { HeaderSource } from "@/lib/http/answer";
import { problemAnswer } from "@/lib/http/problem";
import { readJsonBody } from "@/lib/http/read-body";
import { tokenPrincipal } from "@/lib/auth/token-guard";
import type { Runtime } from "@/lib/server/runtime";
import { listensOnLoopbackOnly } from "@/lib/server/listening-address";
import { mcpOriginRefusal } from "./allowed-origin";
import { callTool } from "./call-tool";
import { JsonRpcError, readCallParams, type CallParams } from "./call-tool-request";
import { forwardTaskRequest, readTaskParams } from "./tasks";
import { TaskAwareServer } from "./task-aware-server";
import { listMcpTools, META_KEY_FIELD } from "./tools";

export const MCP_PATH = "/mcp";

const INSTRUCTIONS =
  "Idemgate runs each write tool's action exactly once per idempotency key. Mint one key per logical action (a UUID) before the first " +
  `attempt and send it as tools/call \`params.idempotencyKey\` (or \`_meta["${META_KEY_FIELD}"]\`) on that attempt and every retry of it: ` +
  "a retry gets the first call's result and the action does not run again. A key in the `idempotency_key` argument counts too, but is " +
  "advisory: identical calls within a short window count as one action whatever key they carry. Read tools need no key.";

/** What one POST's server needs: the runtime, the caller, and the message as it was sent. */
interface McpExchange {
  runtime: Runtime;
  caller: { principal: TokenPrincipal; headers: HeaderSource };
  /** the request's params as sent: the SDK drops params it does not know, `idempotencyKey` among them */
  rawParams: unknown;
}

const EXCHANGE = "io.idemgate/exchange";

/**
 * An MCP server for one HTTP request, for one caller: stateless, like the gateway itself. `era` is
 * the revision the request speaks: `modern` (2026-07-28: `server/discover`, the protocol version
 * and capabilities in each request's `_meta`) or `legacy` (2025-11-25 and before: `initialize`).
 */
export function createMcpServer(exchange: McpExchange, era: "legacy" | "modern"): Server {
  const { runtime, caller } = exchange;
  const server = new TaskAwareServer(
    { name: "idemgate", version: packageJson.version },
    {
      capabilities: {
        tools: { listChanged: false },
        // 2025-11-25 task-augmented tools/call, for a guarded server's tools that run as tasks
        // (tasks.ts); no tasks/list: Idemgate keeps no list of a scope's tasks. The 2026-07-28
        // revision has tasks as an extension, not offered yet.
        ...(era === "legacy" ? { tasks: { cancel: {}, requests: { tools: { call: {} } } } } : {}),
      },
      instructions: INSTRUCTIONS,
    },
  );
  server.setRequestHandler("tools/list", async () => ({ tools: listMcpTools(runtime.registry) }) as never);
  server.setRequestHandler("tools/call", async () =>
    rpc(async () => {
      const params = readCallParams(exchange.rawParams);
      if (era === "modern" && params.task !== undefined) {
        throw new JsonRpcError(-32602, "params.task is a 2025-11-25 task-augmented call; on 2026-07-28 tasks are an extension Idemgate does not offer yet: call without it, or over 2025-11-25");
      }
      return callTool(params, caller, runtime);
    }) as never,
  );
  if (era === "legacy") {
    for (const method of ["tasks/get", "tasks/result", "tasks/cancel"] as const) {
      // not among the SDK's methods since tasks left the core protocol: registered as methods of our own
      server.setRequestHandler(method, { params: z.looseObject({}) }, async () => rpc(() => forwardTaskRequest(method, readTaskParams(exchange.rawParams), caller, runtime)));
    }
  }
  return server;
}

/** Idemgate's JSON-RPC errors as the SDK sends them: code and message as they are. */
async function rpc<T>(answer: () => Promise<T>): Promise<T> {
  try {
    return await answer();
  } catch (err) {
    if (err instanceof JsonRpcError) throw new ProtocolError(err.code, err.message, err.data);
    throw err;
  }
}

const holder = globalThis as unknown as { __idemgateMcpHandler?: McpHttpHandler };

/**
 * The SDK's handler for the 2026-07-28 revision, once per process: a server per request, built for
 * the caller, who rides in `authInfo` (the SDK passes it through untouched). 2025 requests are told
 * apart before it (isLegacyRequest, as the SDK itself tells them) and served in serveLegacy.
 */
function modernHandler(): McpHttpHandler {
  holder.__idemgateMcpHandler ??= createMcpHandler(
    ({ authInfo }) => createMcpServer((authInfo?.extra as Record<string, McpExchange>)[EXCHANGE], "modern"),
    // "auto" answers with one JSON body, as Idemgate sends nothing before a call's result
    { legacy: "reject" },
  );
  return holder.__idemgateMcpHandler;
}

/**
 * A 2025-11-25 (or earlier) request: stateless, a server and transport of its own, answered with
 * one JSON body (the SDK's own stateless fallback would answer with an event stream).
 */
async function serveLegacy(request: Request, body: unknown, exchange: McpExchange): Promise<Response> {
  const server = createMcpServer(exchange, "legacy");
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  try {
    await server.connect(transport);
    return await transport.handleRequest(request, { parsedBody: body });
  } finally {
    await server.close().catch(() => {});
  }
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
    // before the token is looked at: a page a browser was tricked into calling from gets nothing, not even a 401
    const refusal = mcpOriginRefusal(request.headers, {
      trustedProxies: rt.config.trustedProxies,
      allowedOrigins: rt.config.mcpAllowedOrigins,
      loopbackOnly: listensOnLoopbackOnly(),
    });
    if (refusal) return jsonRpcError(403, -32000, `Forbidden: ${refusal}`);
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

  // A bad tools/call or tasks/* request is answered here, before the SDK's own check (whose
  // message is a schema dump): -32602 with a message a person can read.
  const message = body as { id?: unknown; method?: unknown; params?: unknown };
  const id = typeof message.id === "string" || typeof message.id === "number" ? message.id : null;
  if (id !== null && typeof message.method === "string") {
    try {
      if (message.method === "tools/call") readCallParams(message.params);
      else if (message.method.startsWith("tasks/")) readTaskParams(message.params);
    } catch (err) {
      if (err instanceof JsonRpcError) return jsonRpcError(200, err.code, err.message, {}, id);
      throw err;
    }
  }
  const exchange: McpExchange = { runtime: rt, caller: { principal, headers: request.headers }, rawParams: message.params };
  const authInfo: AuthInfo = { token: "", clientId: principal.tokenId, scopes: [principal.scope], extra: { [EXCHANGE]: exchange } };
  const response = (await isLegacyRequest(request, body)) ? await serveLegacy(request, body, exchange) : await modernHandler().fetch(request, { parsedBody: body, authInfo });
  // JSON responses are complete once fetch resolves: nothing more will be written
  const headers = new Headers(response.headers);
  headers.set("Cache-Control", "no-store");
  return new Response(response.body, { status: response.status, headers });
}

function jsonRpcError(status: number, code: number, message: string, headers: Record<string, string> = {}, id: string | number | null = null): Response {
  return new Response(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id }), {
    status,
    headers: { "Content-Type": "application/json", "Cache-Control": "no-store", ...headers },
  });
}
