import { randomUUID } from "node:crypto";
import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  CancelTaskRequestSchema,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  ListToolsRequestSchema,
  McpError,
  RELATED_TASK_META_KEY,
  type CallToolResult,
  type Task,
} from "@modelcontextprotocol/sdk/types.js";

/**
 * An MCP server that runs tools as tasks (the 2025-11-25 task-augmented `tools/call`), built with
 * the SDK's own server, served over Streamable HTTP with sessions, in the test's process. It counts
 * every task it creates and every time a tool body runs, so a test sees a second task or a second
 * run of the side effect.
 * - `start_job` (a write, `taskSupport: optional`): as a task, creates one and finishes it after
 *   `ms`; without, runs at once;
 * - `only_task` (a write, `taskSupport: required`): refuses a call that is not a task (-32601);
 * - `plain` (a write, no task support, with a title, icons and an output schema).
 */
export interface McpTaskServer {
  /** http://127.0.0.1:<port>/mcp */
  url: string;
  /** tasks created, by the label argument */
  created(label: string): number;
  /** tool bodies run (a task's or a direct call's), by the label argument */
  runs(label: string): number;
  close(): Promise<void>;
}

interface HeldTask {
  task: Task;
  result: Promise<CallToolResult>;
}

export async function startMcpTaskServer(): Promise<McpTaskServer> {
  const tasks = new Map<string, HeldTask>();
  const created = new Map<string, number>();
  const runs = new Map<string, number>();
  const bump = (map: Map<string, number>, label: string) => map.set(label, (map.get(label) ?? 0) + 1);

  const work = async (tool: string, label: string, ms: number): Promise<CallToolResult> => {
    bump(runs, label);
    await new Promise((r) => setTimeout(r, ms));
    const value = { tool, label, run: runs.get(label) };
    return { content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: value };
  };

  const build = () => {
    const server = new Server(
      { name: "task-test-server", version: "1.0.0" },
      { capabilities: { tools: {}, tasks: { cancel: {}, requests: { tools: { call: {} } } } } },
    );
    const schema = { type: "object" as const, properties: { label: { type: "string" }, ms: { type: "integer" } }, required: ["label"] };
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [
        { name: "start_job", description: "Starts a job (a side effect)", inputSchema: schema, execution: { taskSupport: "optional" as const } },
        { name: "only_task", description: "Starts a job that runs only as a task", inputSchema: schema, execution: { taskSupport: "required" as const } },
        {
          name: "plain",
          title: "Plain job",
          description: "Does something at once",
          icons: [{ src: "https://icons.example/plain.png", mimeType: "image/png" }],
          inputSchema: schema,
          outputSchema: { type: "object" as const, properties: { tool: { type: "string" }, label: { type: "string" }, run: { type: "integer" } }, required: ["tool", "label", "run"] },
        },
      ],
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request) => {
      const { name, task } = request.params;
      const args = request.params.arguments as { label: string; ms?: number };
      const ms = args.ms ?? 50;
      if (!task) {
        if (name === "only_task") throw new McpError(ErrorCode.MethodNotFound, "only_task runs only as a task");
        return work(name, args.label, ms);
      }
      if (name === "plain") throw new McpError(ErrorCode.MethodNotFound, "plain does not run as a task");
      bump(created, args.label);
      const now = new Date().toISOString();
      const held: HeldTask = {
        task: { taskId: randomUUID(), status: "working", createdAt: now, lastUpdatedAt: now, ttl: task.ttl ?? 60_000, pollInterval: 20 },
        result: work(name, args.label, ms),
      };
      void held.result.then(() => {
        if (held.task.status === "working") held.task = { ...held.task, status: "completed", lastUpdatedAt: new Date().toISOString() };
      });
      tasks.set(held.task.taskId, held);
      return { task: held.task };
    });
    const find = (taskId: string) => {
      const held = tasks.get(taskId);
      if (!held) throw new McpError(ErrorCode.InvalidParams, `no task ${taskId}`);
      return held;
    };
    server.setRequestHandler(GetTaskRequestSchema, async (request) => find(request.params.taskId).task);
    server.setRequestHandler(GetTaskPayloadRequestSchema, async (request) => {
      const result = await find(request.params.taskId).result;
      return { ...result, _meta: { [RELATED_TASK_META_KEY]: { taskId: request.params.taskId } } };
    });
    server.setRequestHandler(CancelTaskRequestSchema, async (request) => {
      const held = find(request.params.taskId);
      held.task = { ...held.task, status: "cancelled", lastUpdatedAt: new Date().toISOString() };
      return held.task;
    });
    return server;
  };

  const transports = new Map<string, StreamableHTTPServerTransport>();
  const http: HttpServer = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body: unknown = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
    const session = req.headers["mcp-session-id"];
    let transport = typeof session === "string" ? transports.get(session) : undefined;
    if (!transport) {
      const made = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => void transports.set(id, made) });
      await build().connect(made);
      transport = made;
    }
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    created: (label) => created.get(label) ?? 0,
    runs: (label) => runs.get(label) ?? 0,
    async close() {
      await Promise.all([...transports.values()].map((t) => t.close().catch(() => {})));
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}
