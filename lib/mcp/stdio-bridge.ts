import type { Readable, Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { ErrorCode, ListToolsRequestSchema, ListToolsResultSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import packageJson from "@/package.json";
// as on the server: `tools/call` params kept whole (`idempotencyKey` included), readable -32602s
import { CallToolWithKeySchema, JsonRpcError, withoutMcpPrefix } from "./call-tool-request";
import { CancelTaskSchema, GetTaskResultRequestSchema, GetTaskSchema } from "./tasks";

/** An answer passed on as Idemgate gave it: a tool result, or a task (the server checks its shape). */
const AsAnswered = z.looseObject({});

/** How long a forwarded call may take: a slow tool's lease, plus a duplicate's wait for it. */
const CALL_TIMEOUT_MS = 5 * 60_000;

export interface StdioBridgeOptions {
  /** the Idemgate MCP endpoint, e.g. http://localhost:3000/mcp */
  url: URL;
  token: string;
  stdin?: Readable;
  stdout?: Writable;
  /** diagnostics; never stdout, which carries the protocol */
  log?: (line: string) => void;
}

/** `http://host:3000` or `http://host:3000/` means the server's /mcp. */
export function mcpEndpoint(url: string): URL {
  const parsed = new URL(url);
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new TypeError(`--url must be an http(s) URL, not ${url}`);
  if (parsed.pathname === "/" || parsed.pathname === "") parsed.pathname = "/mcp";
  return parsed;
}

/**
 * MCP on stdin/stdout for clients that only launch local processes, forwarded to a running
 * Idemgate's /mcp with the API token. `tools/list` and `tools/call` pass through whole, with
 * `params.idempotencyKey` and `_meta`, so keys and replays work as over HTTP. Resolves when stdin
 * ends (the client went away).
 */
export async function runStdioBridge(options: StdioBridgeOptions): Promise<void> {
  const log = options.log ?? ((line: string) => process.stderr.write(`idemgate mcp: ${line}\n`));
  const stdin = options.stdin ?? process.stdin;
  const upstream = new Client({ name: "idemgate-stdio-bridge", version: packageJson.version });
  const http = new StreamableHTTPClientTransport(options.url, { requestInit: { headers: { Authorization: `Bearer ${options.token}` } } });
  try {
    await upstream.connect(http);
  } catch (err) {
    throw new BridgeError(`cannot reach Idemgate's MCP endpoint at ${options.url.href}: ${describe(err)}`);
  }
  log(`forwarding MCP on stdin/stdout to ${options.url.href}`);

  const server = new Server(
    { name: "idemgate", version: packageJson.version },
    { capabilities: { tools: { listChanged: false }, ...(upstream.getServerCapabilities()?.tasks ? { tasks: upstream.getServerCapabilities()!.tasks } : {}) }, instructions: upstream.getInstructions() },
  );
  server.setRequestHandler(ListToolsRequestSchema, (request, extra) =>
    forward("tools/list", () => upstream.request({ method: "tools/list", params: request.params }, ListToolsResultSchema, { signal: extra.signal })),
  );
  server.setRequestHandler(CallToolWithKeySchema, (request, extra) =>
    forward("tools/call", () =>
      upstream.request({ method: "tools/call", params: request.params }, AsAnswered, {
        signal: extra.signal,
        timeout: CALL_TIMEOUT_MS,
      }) as never,
    ),
  );
  if (upstream.getServerCapabilities()?.tasks) {
    // the tasks a guarded server created for task-augmented calls, read under Idemgate's handles
    for (const [schema, method] of [
      [GetTaskSchema, "tasks/get"],
      [GetTaskResultRequestSchema, "tasks/result"],
      [CancelTaskSchema, "tasks/cancel"],
    ] as const) {
      server.setRequestHandler(schema, (request, extra) =>
        forward(method, () => upstream.request({ method, params: request.params }, AsAnswered, { signal: extra.signal, timeout: CALL_TIMEOUT_MS }) as never),
      );
    }
  }
  server.onerror = (err) => log(`protocol error: ${describe(err)}`);

  const ended = new Promise<void>((resolve) => {
    stdin.once("end", resolve);
    stdin.once("close", resolve);
  });
  await server.connect(new StdioServerTransport(stdin, options.stdout ?? process.stdout));
  await ended;
  await server.close().catch(() => {});
  await upstream.close().catch(() => {});

  async function forward<T>(method: string, send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (err) {
      // Idemgate's own answer (an unknown tool, invalid params) goes back as it came: its code and
      // message, without the "MCP error <code>: " our client's McpError put in front (rethrown
      // whole, the client at the other end would read that prefix twice)
      if (err instanceof McpError) throw new JsonRpcError(err.code, withoutMcpPrefix(err.message), err.data);
      log(`${method} failed: ${describe(err)}`);
      throw new JsonRpcError(
        ErrorCode.InternalError,
        `the request to Idemgate at ${options.url.href} failed (${describe(err)}); a tool call may or may not have reached it: ` +
          `retry with the same idempotency key, which runs it at most once`,
      );
    }
  }
}

export class BridgeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BridgeError";
  }
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as { cause?: unknown }).cause;
  return cause instanceof Error ? `${err.message}: ${cause.message}` : err.message;
}
