import { randomUUID } from "node:crypto";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  CallToolResultSchema,
  CancelTaskResultSchema,
  CreateTaskResultSchema,
  GetTaskPayloadResultSchema,
  GetTaskResultSchema,
  McpError,
  RELATED_TASK_META_KEY,
} from "@modelcontextprotocol/sdk/types.js";
import { Client as ClientV2, StreamableHTTPClientTransport as StreamableHTTPClientTransportV2 } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { connectClient, startMcpGateway, type McpGateway } from "@/test/support/mcp-gateway";
import { startMcpTaskServer, type McpTaskServer } from "@/test/support/mcp-task-server";
import { startMcpV2TaskServer, type McpV2TaskServer } from "@/test/support/mcp-v2-task-server";
import { stdioBridgeSession } from "@/test/support/stdio-bridge-session";
import { startMcpUpstreams } from "./serve-upstreams";
import { taskHandles } from "./task-handle";
import type { McpUpstreams } from "./upstreams";

// Idemgate in front of an MCP server that answers tools/call with tasks (2025-11-25 task-augmented
// calls): the task a write creates is its result under the key, so a retry with the key gets the
// same task back and the server never creates a second one.

let gateway: McpGateway;
let upstreams: McpUpstreams;
let taskServer: McpTaskServer;
let modernTaskServer: McpV2TaskServer;
let client: Client;
let token: string;
let otherTenant: Client;
const logs: string[] = [];

const callAsTask = (c: Client, params: Record<string, unknown>) =>
  c.request({ method: "tools/call", params: { task: { ttl: 60_000 }, ...params } as never }, CreateTaskResultSchema);
const getTask = (c: Client, taskId: string) => c.request({ method: "tasks/get", params: { taskId } }, GetTaskResultSchema);
const taskResult = (c: Client, taskId: string) => c.request({ method: "tasks/result", params: { taskId } }, GetTaskPayloadResultSchema);

async function rpcError(promise: Promise<unknown>): Promise<McpError> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  if (!(err instanceof McpError)) throw new Error(`expected a JSON-RPC error, got ${JSON.stringify(err)}`);
  return err;
}

beforeAll(async () => {
  taskServer = await startMcpTaskServer();
  modernTaskServer = await startMcpV2TaskServer();
  gateway = await startMcpGateway("mcp_tasks");
  const servers = [
    { name: "jobs", url: taskServer.url, timeoutMs: 5_000 },
    { name: "jobs_modern", url: modernTaskServer.url, timeoutMs: 5_000 },
  ];
  upstreams = (await startMcpUpstreams(gateway.runtime, servers, { log: (line) => logs.push(line) }))!;
  token = await gateway.token("tenant-t");
  client = await connectClient(gateway.url, token);
  otherTenant = await connectClient(gateway.url, await gateway.token("tenant-other"));
});

afterAll(async () => {
  await client?.close().catch(() => {});
  await otherTenant?.close().catch(() => {});
  await upstreams?.close();
  await gateway?.close();
  await taskServer?.close();
  await modernTaskServer?.close();
});

describe("a guarded server's tasks", () => {
  it("lists the tools with their task support and offers task-augmented tools/call", async () => {
    expect(client.getServerCapabilities()?.tasks).toMatchObject({ requests: { tools: { call: {} } } });
    const { tools } = await client.listTools();
    const byName = (name: string) => tools.find((t) => t.name === name);
    expect(byName("jobs.start_job")?.execution).toEqual({ taskSupport: "optional" });
    expect(byName("jobs.only_task")?.execution).toEqual({ taskSupport: "required" });
    expect(byName("jobs.plain")?.execution).toBeUndefined();
    expect(byName("jobs.plain")).toMatchObject({ title: "Plain job", icons: [{ src: "https://icons.example/plain.png", mimeType: "image/png" }], outputSchema: { required: ["tool", "label", "run"] } });
  });

  it("lists title, icons and outputSchema on the 2026-07-28 revision too (which has no execution: tasks are an extension there)", async () => {
    const modern = new ClientV2({ name: "v2", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    await modern.connect(new StreamableHTTPClientTransportV2(new URL(gateway.url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    try {
      expect(modern.getProtocolEra()).toBe("modern");
      const { tools } = await modern.listTools();
      expect(tools.find((t) => t.name === "jobs.plain")).toMatchObject({ title: "Plain job", icons: [{ src: "https://icons.example/plain.png" }], outputSchema: { type: "object" } });
      // a structured result checked by the client against that outputSchema
      const label = randomUUID();
      const result = await modern.callTool({ name: "jobs.plain", arguments: { label }, idempotencyKey: `plain-${randomUUID()}` } as never);
      expect(result.structuredContent).toMatchObject({ tool: "plain", label, run: 1 });
    } finally {
      await modern.close();
    }
  });

  it("creates one task for a key: five concurrent calls and a late retry all get the same task handle", async () => {
    const label = randomUUID();
    const key = `task-${randomUUID()}`;
    const answers = await Promise.all(Array.from({ length: 5 }, () => callAsTask(client, { name: "jobs.start_job", arguments: { label }, idempotencyKey: key })));
    const handle = answers[0].task.taskId;
    for (const answer of answers) expect(answer.task.taskId).toBe(handle);
    await new Promise((r) => setTimeout(r, 200));
    const late = await callAsTask(client, { name: "jobs.start_job", arguments: { label }, idempotencyKey: key });
    expect(late.task.taskId).toBe(handle);
    expect(late._meta?.["io.idemgate/result"]).toMatchObject({ key, replayed: true });
    expect(taskServer.created(label)).toBe(1);
    expect(taskServer.runs(label)).toBe(1);

    // the handle is Idemgate's (bound to the caller's scope), and it reads the server's task
    expect(handle).toMatch(/^idgtask1\./);
    const result = await taskResult(client, handle);
    expect(result.structuredContent).toMatchObject({ tool: "start_job", label, run: 1 });
    expect(result._meta?.[RELATED_TASK_META_KEY]).toEqual({ taskId: handle });
    const task = await getTask(client, handle);
    expect(task).toMatchObject({ taskId: handle, status: "completed" });
  });

  it("gives a retry without params.task the task the first call created, as a tool result naming it; nothing runs again", async () => {
    const label = randomUUID();
    const key = `task-${randomUUID()}`;
    const first = await callAsTask(client, { name: "jobs.start_job", arguments: { label }, idempotencyKey: key });
    const retry = await client.request({ method: "tools/call", params: { name: "jobs.start_job", arguments: { label }, idempotencyKey: key } as never }, CallToolResultSchema);
    expect(retry.isError).toBeFalsy();
    expect(retry._meta?.["io.idemgate/task"]).toMatchObject({ taskId: first.task.taskId, status: "working" });
    expect(retry._meta?.[RELATED_TASK_META_KEY]).toEqual({ taskId: first.task.taskId });
    expect(taskServer.created(label)).toBe(1);
  });

  it("creates a task per key: another key is another action", async () => {
    const label = randomUUID();
    const a = await callAsTask(client, { name: "jobs.start_job", arguments: { label }, idempotencyKey: `task-${randomUUID()}` });
    const b = await callAsTask(client, { name: "jobs.start_job", arguments: { label }, idempotencyKey: `task-${randomUUID()}` });
    expect(a.task.taskId).not.toBe(b.task.taskId);
    expect(taskServer.created(label)).toBe(2);
  });

  it("answers tasks/get and tasks/cancel only for a handle made for the caller's scope", async () => {
    const label = randomUUID();
    const { task } = await callAsTask(client, { name: "jobs.start_job", arguments: { label, ms: 2_000 }, idempotencyKey: `task-${randomUUID()}` });
    expect((await rpcError(getTask(otherTenant, task.taskId))).code).toBe(-32602);
    expect((await rpcError(otherTenant.request({ method: "tasks/cancel", params: { taskId: task.taskId } }, CancelTaskResultSchema))).code).toBe(-32602);
    const tampered = task.taskId.replace(/.$/, (c) => (c === "A" ? "B" : "A"));
    expect((await rpcError(getTask(client, tampered))).message).toContain("Unknown task");
    expect((await rpcError(getTask(client, "786512e2-9e0d-44bd-8f29-789f320fe840"))).code).toBe(-32602);
    // still working: the other tenant's cancel did not reach the server
    expect((await getTask(client, task.taskId)).status).toBe("working");
    const cancelled = await client.request({ method: "tasks/cancel", params: { taskId: task.taskId } }, CancelTaskResultSchema);
    expect(cancelled).toMatchObject({ taskId: task.taskId, status: "cancelled" });
  });

  it("passes on the guarded server's refusal of a task request as its error code, without its words", async () => {
    // a handle Idemgate made for this scope, naming a task the server does not have
    const handle = taskHandles(gateway.runtime.config).handle("tenant-t", { tool: "jobs.start_job", taskId: randomUUID() });
    const refused = await rpcError(getTask(client, handle));
    expect(refused.code).toBe(-32602);
    expect(refused.message).toContain("the MCP server jobs refused tasks/get for this task (error -32602)");
    expect(refused.message).not.toContain("no task");
  });

  it("refuses a task for a tool that never runs as one, and a call without a task for a tool that runs only as one; nothing runs", async () => {
    const label = randomUUID();
    const notATaskTool = await rpcError(callAsTask(client, { name: "jobs.plain", arguments: { label }, idempotencyKey: `task-${randomUUID()}` }));
    expect(notATaskTool.code).toBe(-32601);
    expect(notATaskTool.message).toContain("does not run as a task");
    const demo = await rpcError(callAsTask(client, { name: "payments.charge", arguments: { customerId: "c", amountCents: 1, currency: "EUR" }, idempotencyKey: `task-${randomUUID()}` }));
    expect(demo.code).toBe(-32601);
    const key = `task-${randomUUID()}`;
    const noTask = await rpcError(client.request({ method: "tools/call", params: { name: "jobs.only_task", arguments: { label }, idempotencyKey: key } as never }, CallToolResultSchema));
    expect(noTask.code).toBe(-32601);
    expect(noTask.message).toContain("runs only as a task");
    const badTtl = await rpcError(client.request({ method: "tools/call", params: { name: "jobs.only_task", arguments: { label }, idempotencyKey: key, task: { ttl: "soon" } } as never }, CreateTaskResultSchema));
    expect(badTtl.code).toBe(-32602);
    expect(taskServer.runs(label)).toBe(0);
    expect(await gateway.runtime.store.get("tenant-t", key)).toBeNull();
    // the required one runs as a task, once per key
    const task = await callAsTask(client, { name: "jobs.only_task", arguments: { label }, idempotencyKey: key });
    expect((await callAsTask(client, { name: "jobs.only_task", arguments: { label }, idempotencyKey: key })).task.taskId).toBe(task.task.taskId);
    expect(taskServer.created(label)).toBe(1);
  });

  it("works through the stdio bridge: the task, the same one on a retry, and tasks/get under the handle", async () => {
    const bridge = stdioBridgeSession({ url: gateway.url, token });
    const send = (method: string, params?: unknown) => (method.startsWith("notifications/") ? bridge.notify(method, params) : bridge.request(method, params));
    const init = await send("initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "0" } });
    expect(init.result.capabilities.tasks).toMatchObject({ requests: { tools: { call: {} } } });
    await send("notifications/initialized");
    const label = randomUUID();
    const call = { name: "jobs.start_job", arguments: { label }, idempotencyKey: `task-${randomUUID()}`, task: { ttl: 60_000 } };
    const first = await send("tools/call", call);
    if (!first.result) throw new Error(JSON.stringify(first));
    const handle = first.result.task.taskId;
    expect(handle).toMatch(/^idgtask1\./);
    expect((await send("tools/call", call)).result.task.taskId).toBe(handle);
    expect(taskServer.created(label)).toBe(1);
    expect((await send("tasks/result", { taskId: handle })).result.structuredContent).toMatchObject({ label, run: 1 });
    expect((await send("tasks/get", { taskId: handle })).result).toMatchObject({ taskId: handle, status: "completed" });
    await bridge.close();
  });
});

describe("a refusal of a guarded tool that declares an output schema", () => {
  it("is a tool error without structuredContent, which an SDK v1 client (it checks even an error's structuredContent against the schema) reads as it came", async () => {
    const label = randomUUID();
    // the v1 client has the tool's outputSchema from tools/list
    await client.listTools();
    const keyless = (await client.callTool({ name: "jobs.plain", arguments: { label } })) as { isError?: boolean; structuredContent?: unknown; content: { type: string; text: string }[] };
    expect(keyless.isError).toBe(true);
    expect(keyless.structuredContent).toBeUndefined();
    expect(JSON.parse(keyless.content[0].text)).toMatchObject({ type: "/problems/missing_key" });
    expect(keyless.content[0].text).toContain("params.idempotencyKey");
    expect(taskServer.runs(label)).toBe(0);
  });
});

// The v2 SDK (2.4.0) carries no tasks on 2026-07-28: its server checks a tools/call result against
// that revision's schema (a task is not a tool result) and its client refuses a `resultType: "task"`.
// So a guarded server on 2026-07-28 that creates a task answers an error after creating it: the
// outcome is unknown and the key is held, and no retry with the key creates a second task.
describe("a guarded server on 2026-07-28 that answers tools/call with a task", () => {
  it("creates one task for a key: five concurrent calls and a late retry get the key held as unknown, never a second task", async () => {
    const modern = new ClientV2({ name: "v2", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } });
    await modern.connect(new StreamableHTTPClientTransportV2(new URL(gateway.url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
    try {
      expect(modern.getNegotiatedProtocolVersion()).toBe("2026-07-28");
      const label = randomUUID();
      const key = `task26-${randomUUID()}`;
      type Answer = { isError?: boolean; structuredContent?: { type?: string; key?: string } };
      const callOnce = () => modern.callTool({ name: "jobs_modern.start_job", arguments: { label }, idempotencyKey: key } as never) as Promise<Answer>;
      const answers = await Promise.all(Array.from({ length: 5 }, callOnce));
      await vi.waitFor(() => expect(modernTaskServer.runs(label)).toBe(1));
      const late = await callOnce();
      for (const answer of [...answers, late]) {
        expect(answer.isError).toBe(true);
        expect(answer.structuredContent).toMatchObject({ key, type: expect.stringMatching(/^\/problems\/(outcome_unknown|conflict)$/) });
      }
      expect(late.structuredContent?.type).toBe("/problems/outcome_unknown");
      expect(modernTaskServer.created(label)).toBe(1);
      expect(modernTaskServer.runs(label)).toBe(1);
      expect(await gateway.runtime.store.get("tenant-t", key)).toMatchObject({ status: "unknown" });
      // the guard spoke 2026-07-28 to that server
      expect(new Set(modernTaskServer.callRevisions())).toEqual(new Set(["2026-07-28"]));
    } finally {
      await modern.close();
    }
  });
});
