import { Transform, type Readable, type Writable } from "node:stream";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { ProtocolError, ProtocolErrorCode } from "@modelcontextprotocol/server";
import { serveStdio, StdioServerTransport } from "@modelcontextprotocol/server/stdio";
import { z } from "zod";
import packageJson from "@/package.json";
// as on the server: readable -32602s for bad tools/call and tasks/* params
import { JsonRpcError, readCallParams, withoutMcpPrefix } from "./call-tool-request";
import { TaskAwareServer } from "./task-aware-server";
import { readTaskParams } from "./tasks";

/** An answer passed on as Idemgate gave it: a tool result, or a task. */
const AsAnswered = z.looseObject({});

type Era = "legacy" | "modern";
type RawMessage = { id?: unknown; method?: unknown; params?: unknown };

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
 * Idemgate's /mcp with the API token. Both revisions: the client's opening decides (2026-07-28, or
 * `initialize` for 2025-11-25) and the bridge speaks the same revision to Idemgate. `tools/list`,
 * `tools/call` and (on 2025-11-25) the `tasks/*` requests pass through whole, with
 * `params.idempotencyKey` and `_meta` as the client sent them, so keys and replays work as over
 * HTTP. Resolves when stdin ends (the client went away).
 */
export async function runStdioBridge(options: StdioBridgeOptions): Promise<void> {
  const log = options.log ?? ((line: string) => process.stderr.write(`idemgate mcp: ${line}\n`));
  const stdin = options.stdin ?? process.stdin;
  const connections = new Map<Era, Promise<Client>>();
  const connect = (era: Era | "auto") => {
    const client = new Client(
      { name: "idemgate-stdio-bridge", version: packageJson.version },
      { versionNegotiation: { mode: era === "modern" ? { pin: "2026-07-28" } : era === "legacy" ? "legacy" : "auto" } },
    );
    const http = new StreamableHTTPClientTransport(options.url, { requestInit: { headers: { Authorization: `Bearer ${options.token}` } } });
    return client.connect(http).then(() => client);
  };
  // reached once before serving, so a wrong URL or token is said at start, not at the first call
  let first: Client;
  try {
    first = await connect("auto");
  } catch (err) {
    throw new BridgeError(`cannot reach Idemgate's MCP endpoint at ${options.url.href}: ${describe(err)}`);
  }
  connections.set(first.getProtocolEra() ?? "legacy", Promise.resolve(first));
  const upstreamFor = (era: Era) => {
    let found = connections.get(era);
    if (!found) connections.set(era, (found = connect(era)));
    return found;
  };
  log(`forwarding MCP on stdin/stdout to ${options.url.href}`);

  // The SDK drops params it does not know (`idempotencyKey`) before a handler sees them: each
  // request's params are kept as they came, by id, on their way in.
  const raw = new Map<string | number, unknown>();
  const stdout = options.stdout ?? process.stdout;
  const tapped = tapRequests(stdin, raw, stdout);
  const paramsOf = (id: string | number) => {
    const params = raw.get(id);
    raw.delete(id);
    return params;
  };

  const handle = serveStdio(
    async ({ era }) => {
      const upstream = await upstreamFor(era);
      const capabilities = upstream.getServerCapabilities() ?? {};
      const server = new TaskAwareServer(
        { name: "idemgate", version: packageJson.version },
        { capabilities: { tools: { listChanged: false }, ...(era === "legacy" && capabilities.tasks ? { tasks: capabilities.tasks } : {}) }, instructions: upstream.getInstructions() },
      );
      server.setRequestHandler("tools/list", (request, ctx) => forward("tools/list", () => upstream.request({ method: "tools/list", params: request.params }, AsAnswered, { signal: ctx.mcpReq.signal })) as never);
      server.setRequestHandler("tools/call", (_request, ctx) =>
        forward("tools/call", () =>
          upstream.request({ method: "tools/call", params: readCallParams(paramsOf(ctx.mcpReq.id)) }, AsAnswered, { signal: ctx.mcpReq.signal, timeout: CALL_TIMEOUT_MS }),
        ) as never,
      );
      if (era === "legacy" && capabilities.tasks) {
        // the tasks a guarded server created for task-augmented calls, read under Idemgate's handles
        for (const method of ["tasks/get", "tasks/result", "tasks/cancel"] as const) {
          server.setRequestHandler(method, { params: z.looseObject({}) }, (_params, ctx) =>
            forward(method, () => upstream.request({ method, params: readTaskParams(paramsOf(ctx.mcpReq.id)) }, AsAnswered, { signal: ctx.mcpReq.signal, timeout: CALL_TIMEOUT_MS })),
          );
        }
      }
      return server;
    },
    { transport: new StdioServerTransport(tapped, stdout), onerror: (err) => log(`protocol error: ${describe(err)}`) },
  );

  await new Promise<void>((resolve) => {
    tapped.once("end", resolve);
    tapped.once("close", resolve);
  });
  await handle.close().catch(() => {});
  for (const connection of connections.values()) await (await connection.catch(() => null))?.close().catch(() => {});

  async function forward<T>(method: string, send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (err) {
      // Idemgate's own answer (an unknown tool, invalid params) goes back as it came: its code and message
      if (err instanceof JsonRpcError) throw new ProtocolError(err.code, err.message, err.data);
      if (err instanceof ProtocolError) throw new ProtocolError(err.code, withoutMcpPrefix(err.message), err.data);
      log(`${method} failed: ${describe(err)}`);
      throw new ProtocolError(
        ProtocolErrorCode.InternalError,
        `the request to Idemgate at ${options.url.href} failed (${describe(err)}); a tool call may or may not have reached it: ` +
          `retry with the same idempotency key, which runs it at most once`,
      );
    }
  }
}

/**
 * stdin passed on line by line (newline-delimited JSON-RPC), each request's params kept by its id
 * as it goes by. A tools/call or tasks/* request with bad params is answered here with a -32602 a
 * person can read (the SDK's own check would answer with a schema dump) and not passed on.
 */
function tapRequests(stdin: Readable, raw: Map<string | number, unknown>, stdout: Writable): Transform {
  let pending = "";
  const tap = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      pending += chunk.toString("utf8");
      const passed: string[] = [];
      for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n")) {
        const line = pending.slice(0, nl + 1);
        pending = pending.slice(nl + 1);
        let message: RawMessage | null = null;
        try {
          message = JSON.parse(line) as RawMessage;
        } catch {
          // not JSON: the transport answers it
        }
        const id = message && (typeof message.id === "string" || typeof message.id === "number") ? message.id : null;
        if (message && id !== null && typeof message.method === "string") {
          try {
            if (message.method === "tools/call") readCallParams(message.params);
            else if (message.method.startsWith("tasks/")) readTaskParams(message.params);
          } catch (err) {
            if (!(err instanceof JsonRpcError)) throw err;
            stdout.write(`${JSON.stringify({ jsonrpc: "2.0", id, error: { code: err.code, message: err.message } })}\n`);
            continue;
          }
          raw.set(id, message.params);
        }
        passed.push(line);
      }
      done(null, passed.join(""));
    },
    flush(done) {
      done(null, pending);
    },
  });
  stdin.pipe(tap);
  return tap;
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
