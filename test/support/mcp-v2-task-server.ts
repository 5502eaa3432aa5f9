import { randomUUID } from "node:crypto";
import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createMcpHandler, McpServer } from "@modelcontextprotocol/server";
import { z } from "zod";

/**
 * An MCP server built with the v2 SDK (@modelcontextprotocol/server) that answers `tools/call` on
 * 2026-07-28 with a task, as a server of the tasks extension (`io.modelcontextprotocol/tasks`) would:
 * a result of `resultType: "task"` naming the task it created. The SDK (2.4.0) has no tasks runtime on
 * that revision (its task methods are 2025-11-25 vocabulary), so the tool handler writes the result
 * by hand — and the SDK's server then checks it against the 2026-07-28 tools/call result schema and
 * answers a JSON-RPC error instead, after the task was created (its client would refuse the result
 * too: a `resultType` other than complete or input_required is UnsupportedResultType). In the test's
 * process; it counts the tasks it creates and the job bodies it runs, by the label argument.
 */
export interface McpV2TaskServer {
  /** http://127.0.0.1:<port>/mcp */
  url: string;
  created(label: string): number;
  runs(label: string): number;
  /** the MCP-Protocol-Version of each tools/call it was sent */
  callRevisions(): string[];
  close(): Promise<void>;
}

export async function startMcpV2TaskServer(): Promise<McpV2TaskServer> {
  const created = new Map<string, number>();
  const runs = new Map<string, number>();
  const callRevisions: string[] = [];
  const bump = (map: Map<string, number>, label: string) => map.set(label, (map.get(label) ?? 0) + 1);

  const build = () => {
    const server = new McpServer({ name: "task-test-server-v2", version: "2.0.0" });
    server.registerTool("start_job", { description: "Starts a job as a task (a side effect)", inputSchema: { label: z.string() } }, async ({ label }) => {
      bump(created, label);
      const taskId = randomUUID();
      setTimeout(() => bump(runs, label), 20);
      const now = new Date().toISOString();
      return { resultType: "task", task: { taskId, status: "working", createdAt: now, lastUpdatedAt: now, ttl: 60_000 } } as never;
    });
    return server;
  };
  const handler = createMcpHandler(() => build());

  const http: HttpServer = createServer((req, res) => {
    (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const raw = Buffer.concat(chunks);
      if (req.headers["mcp-method"] === "tools/call") callRevisions.push(String(req.headers["mcp-protocol-version"]));
      const headers = new Headers();
      for (const [name, values] of Object.entries(req.headersDistinct)) for (const value of values ?? []) headers.append(name, value);
      const request = new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers, body: req.method === "POST" ? raw : undefined });
      const response = await handler.fetch(request, { parsedBody: raw.length > 0 ? JSON.parse(raw.toString("utf8")) : undefined });
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.end(Buffer.from(await response.arrayBuffer()));
    })().catch((err) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(err));
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    created: (label) => created.get(label) ?? 0,
    runs: (label) => runs.get(label) ?? 0,
    callRevisions: () => [...callRevisions],
    async close() {
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}
