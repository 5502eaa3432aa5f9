// An MCP server built with the SDK, for tests of Idemgate in front of other MCP servers. Every call
// of a tool that changes something appends a line to $EFFECTS_FILE before answering, so a test can
// count side effects even after it killed this process.
//   node --import tsx test/support/mcp-test-server.ts --stdio
//   node --import tsx test/support/mcp-test-server.ts --http PORT      (stateful sessions, /mcp)
import { randomUUID } from "node:crypto";
import { appendFileSync } from "node:fs";
import { createServer } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const effectsFile = process.env.EFFECTS_FILE;
const effect = (line: string) => {
  if (effectsFile) appendFileSync(effectsFile, `${line}\n`);
};
const text = (value: unknown) => ({ content: [{ type: "text" as const, text: JSON.stringify(value) }], structuredContent: value as Record<string, unknown> });
const counts = new Map<string, number>();
/** What the HTTP server answers to `fail_http`: an error page naming internals a caller must not read. */
const FAILURE_PAGE = "upstream error: pool exhausted connecting to db.internal:5432 as svc_files";

function buildServer(): McpServer {
  const server = new McpServer({ name: "counting-test-server", version: "1.0.0" });
  server.registerTool(
    "increment",
    { description: "Adds one to a named counter (a side effect)", inputSchema: { label: z.string() } },
    async ({ label }) => {
      effect(`increment:${label}`);
      counts.set(label, (counts.get(label) ?? 0) + 1);
      return text({ label, count: counts.get(label), id: randomUUID() });
    },
  );
  server.registerTool(
    "read_count",
    { description: "A counter's value", inputSchema: { label: z.string() }, annotations: { readOnlyHint: true } },
    async ({ label }) => text({ label, count: counts.get(label) ?? 0 }),
  );
  server.registerTool(
    "set_flag",
    { description: "Sets a flag to a value: repeating it changes nothing more", inputSchema: { name: z.string(), value: z.boolean() }, annotations: { idempotentHint: true, readOnlyHint: false } },
    async ({ name, value }) => {
      effect(`set_flag:${name}`);
      return text({ name, value });
    },
  );
  server.registerTool(
    "hang",
    { description: "Records its side effect, then answers only after `ms`", inputSchema: { label: z.string(), ms: z.number().int() } },
    async ({ label, ms }) => {
      effect(`hang:${label}`);
      await sleep(ms);
      return text({ label, late: true });
    },
  );
  server.registerTool(
    "refuse",
    { description: "Answers with a tool error (a final result)", inputSchema: { label: z.string() } },
    async ({ label }) => {
      effect(`refuse:${label}`);
      return { content: [{ type: "text" as const, text: `refused ${label}` }], isError: true };
    },
  );
  server.registerTool(
    "fail_http",
    {
      description: "Records its side effect; over HTTP the answer is an error page (HTTP 500) instead of a JSON-RPC response",
      inputSchema: { label: z.string() },
    },
    async ({ label }) => {
      effect(`fail_http:${label}`);
      return text({ label });
    },
  );
  server.registerTool(
    "reset_http",
    { description: "Records its side effect; over HTTP the connection is then reset without an answer", inputSchema: { label: z.string() } },
    async ({ label }) => {
      effect(`reset_http:${label}`);
      return text({ label });
    },
  );
  server.registerTool(
    "bad_request",
    { description: "Never runs over HTTP: the request is answered with HTTP 400, as a transport refuses a request it cannot accept", inputSchema: { label: z.string() } },
    async ({ label }) => {
      effect(`bad_request:${label}`);
      return text({ label });
    },
  );
  server.registerTool(
    "shutdown",
    { description: "Answers, then the process exits (a server that goes away)", inputSchema: {} },
    async () => {
      setTimeout(() => process.exit(0), 50);
      return text({ exiting: true });
    },
  );
  server.registerTool(
    "add_tool",
    { description: "Adds a tool named `extra` (the server then says its tool list changed)", inputSchema: {} },
    async () => {
      server.registerTool("extra", { description: "added at run time", inputSchema: {}, annotations: { readOnlyHint: true } }, async () => text({ extra: true }));
      return text({ added: "extra" });
    },
  );
  server.registerTool(
    "echo_args",
    { description: "Answers with the arguments it received, as they came (listed with a schema of its own below)", inputSchema: z.looseObject({}) },
    async (args) => {
      effect(`echo_args:${String((args as { label?: unknown }).label)}`);
      return text({ received: args });
    },
  );
  listAsIs(server, "echo_args", ECHO_ARGS_SCHEMA);
  return server;
}

/**
 * echo_args's schema as listed: a top-level allOf, which Idemgate's converter does not read, and an
 * `idempotency_key` argument of its own (as a payments API's tool might have).
 */
const ECHO_ARGS_SCHEMA = {
  type: "object",
  allOf: [
    { type: "object", properties: { label: { type: "string" } }, required: ["label"] },
    { type: "object", properties: { idempotency_key: { type: "string" } } },
  ],
};

/** Lists `tool` with `inputSchema` as given: the SDK's McpServer lists only schemas it derives from zod objects. */
function listAsIs(server: McpServer, tool: string, inputSchema: Record<string, unknown>): void {
  const handlers = (server.server as unknown as { _requestHandlers: Map<string, (...args: unknown[]) => Promise<{ tools: { name: string }[] }>> })._requestHandlers;
  const list = handlers.get("tools/list")!;
  handlers.set("tools/list", async (...args) => {
    const listed = await list(...args);
    return { ...listed, tools: listed.tools.map((t) => (t.name === tool ? { ...t, inputSchema } : t)) };
  });
}

const mode = process.argv[2];
if (mode === "--stdio") {
  await buildServer().connect(new StdioServerTransport());
} else if (mode === "--http") {
  const port = Number(process.argv[3]);
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const http = createServer(async (req, res) => {
    if (!req.url?.startsWith("/mcp")) {
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body: unknown = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
    const call = body as { method?: string; params?: { name?: string; arguments?: { label?: string } } } | undefined;
    if (call?.method === "tools/call" && call.params?.name === "fail_http") {
      // the side effect happened; then a proxy or framework answers with its error page
      effect(`fail_http:${call.params.arguments?.label ?? ""}`);
      res.writeHead(500, { "Content-Type": "text/plain" }).end(FAILURE_PAGE);
      return;
    }
    if (call?.method === "tools/call" && call.params?.name === "bad_request") {
      res.writeHead(400, { "Content-Type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32600, message: "Bad Request: refused before processing" }, id: null }));
      return;
    }
    if (call?.method === "tools/call" && call.params?.name === "reset_http") {
      // the side effect happened; then the connection drops before any answer
      effect(`reset_http:${call.params.arguments?.label ?? ""}`);
      req.socket.resetAndDestroy();
      return;
    }
    const session = req.headers["mcp-session-id"];
    let transport = typeof session === "string" ? transports.get(session) : undefined;
    if (!transport) {
      if (typeof session === "string") {
        res.writeHead(404, { "Content-Type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }));
        return;
      }
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => void transports.set(id, created),
      });
      created.onclose = () => {
        if (created.sessionId) transports.delete(created.sessionId);
      };
      await buildServer().connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res, body);
  });
  http.listen(port, "127.0.0.1", () => process.stderr.write(`listening on ${port}\n`));
} else {
  process.stderr.write("usage: mcp-test-server.ts --stdio | --http PORT\n");
  process.exit(2);
}
