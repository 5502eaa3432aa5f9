// An MCP server built with the v2 SDK (@modelcontextprotocol/server), for tests of Idemgate in front
// of a server that speaks the stateless 2026-07-28 revision (and 2025-11-25, stateless, as the SDK's
// handler serves it by default). Its tools are named and behave as those of mcp-test-server.ts (the
// 1.x-SDK server): every call of a tool that changes something appends a line to $EFFECTS_FILE
// before answering, so a test can count side effects even after it killed this process.
//   node --import tsx test/support/mcp-v2-test-server.ts --http PORT      (/mcp)
import { randomUUID } from "node:crypto";
import { appendFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";

const effectsFile = process.env.EFFECTS_FILE;
const effect = (line: string) => {
  if (effectsFile) appendFileSync(effectsFile, `${line}\n`);
};
const text = (value: unknown) => ({ content: [{ type: "text" as const, text: JSON.stringify(value) }], structuredContent: value as Record<string, unknown> });
const counts = new Map<string, number>();

/** A server per request, as the 2026-07-28 revision is served: the counters live in this process. */
function buildServer(): McpServer {
  const server = new McpServer({ name: "counting-test-server-v2", version: "2.0.0" });
  server.registerTool("increment", { description: "Adds one to a named counter (a side effect)", inputSchema: { label: z.string() } }, async ({ label }) => {
    effect(`increment:${label}`);
    counts.set(label, (counts.get(label) ?? 0) + 1);
    return text({ label, count: counts.get(label), id: randomUUID() });
  });
  server.registerTool(
    "read_count",
    { description: "A counter's value", inputSchema: { label: z.string() }, annotations: { readOnlyHint: true } },
    async ({ label }) => text({ label, count: counts.get(label) ?? 0 }),
  );
  server.registerTool("hang", { description: "Records its side effect, then answers only after `ms`", inputSchema: { label: z.string(), ms: z.number().int() } }, async ({ label, ms }) => {
    effect(`hang:${label}`);
    await sleep(ms);
    return text({ label, late: true });
  });
  // answered at the HTTP level below; listed so that Idemgate serves them
  server.registerTool("fail_http", { description: "Records its side effect; the answer is an HTTP 500 error page", inputSchema: { label: z.string() } }, async ({ label }) => text({ label }));
  server.registerTool("reset_http", { description: "Records its side effect; then the connection is reset without an answer", inputSchema: { label: z.string() } }, async ({ label }) => text({ label }));
  server.registerTool("bad_request", { description: "Never runs: the request is answered with HTTP 400 and a JSON-RPC error, as the SDK refuses a request it cannot accept", inputSchema: { label: z.string() } }, async ({ label }) => {
    effect(`bad_request:${label}`);
    return text({ label });
  });
  return server;
}

const handler = createMcpHandler(() => buildServer());

async function serve(req: IncomingMessage, res: ServerResponse, port: number): Promise<void> {
  if (!req.url?.startsWith("/mcp")) {
    res.writeHead(404).end();
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks);
  const body: unknown = raw.length > 0 ? JSON.parse(raw.toString("utf8")) : undefined;
  const call = body as { method?: string; params?: { name?: string; arguments?: { label?: string } } } | undefined;
  if (call?.method === "tools/call" && (call.params?.name === "fail_http" || call.params?.name === "reset_http")) {
    // the side effect happened; then a proxy answers with its error page, or the connection drops
    effect(`${call.params.name}:${call.params.arguments?.label ?? ""}`);
    if (call.params.name === "reset_http") req.socket.resetAndDestroy();
    else res.writeHead(500, { "Content-Type": "text/plain" }).end("upstream error: pool exhausted");
    return;
  }
  if (call?.method === "tools/call" && call.params?.name === "bad_request") {
    const id = (body as { id?: unknown }).id ?? null;
    res.writeHead(400, { "Content-Type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32600, message: "Invalid Request: refused before processing" } }));
    return;
  }
  const headers = new Headers();
  for (const [name, values] of Object.entries(req.headersDistinct)) for (const value of values ?? []) headers.append(name, value);
  const request = new Request(`http://127.0.0.1:${port}${req.url}`, { method: req.method, headers, body: req.method === "POST" ? raw : undefined });
  const response = await handler.fetch(request, { parsedBody: body });
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (!response.body) {
    res.end();
    return;
  }
  // an event stream (subscriptions/listen) is written as it comes
  await pipeline(Readable.fromWeb(response.body as import("node:stream/web").ReadableStream), res);
}

const port = Number(process.argv[3]);
if (process.argv[2] !== "--http" || !Number.isInteger(port)) {
  process.stderr.write("usage: mcp-v2-test-server.ts --http PORT\n");
  process.exit(2);
}
const http = createServer((req, res) => {
  serve(req, res, port).catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});
http.listen(port, "127.0.0.1", () => process.stderr.write(`listening on ${port}\n`));
