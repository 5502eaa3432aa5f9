import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import type { CallToolResult, Client, Tool } from "@modelcontextprotocol/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testPort } from "@/scripts/test-ports.mjs";
import { createTestPostgres, REDIS_TEST_URL } from "@/test/support/databases";
import { connectOnRevision, REVISIONS } from "@/test/support/mcp-revisions";
import { ROOT, removeDataDir, startServer, type RunningServer } from "@/test/support/server";
import { deleteRedisPrefix } from "@/test/support/stores";

// The official reference MCP servers, guarded by a production server (scripts/serve.mjs) declared in
// its configuration file's `mcpServers:`, over stdio, each the package's own script run by node from
// where `npx` installed it (as a deployment that installed the package runs it; `command: npx` would
// pay for npm's start on every connect, twice with the v2 client's version probe, which on a loaded
// machine kept eight servers from connecting for minutes): @modelcontextprotocol/server-memory (a knowledge graph kept in a file,
// MEMORY_FILE_PATH, one per declaration in a temporary directory) and
// @modelcontextprotocol/server-everything. Called through Idemgate's /mcp with the official v2 client
// on both protocol revisions (2026-07-28 and 2025-11-25, each case asserting the one it got), on both
// configurations: one server per configuration, both revisions against it. One effect per key, identical replays, keyless writes refused, and
// each `gate` rule observed on real tools:
// - memory: by-annotations (the default): create_entities (a write by its annotations) gated,
//   read_graph (readOnlyHint) never, delete_entities (idempotentHint) passed through and audited;
// - memory_always: `gate: always`, read_graph gated too, and search_nodes set back to by-annotations
//   by a per-tool override;
// - memory_never: `gate: never`, create_entities passed through without a key, still audited;
// - everything: by-annotations, with its long-running tool (readOnlyHint) made a gated write by a
//   per-tool override.
// The first `npx` fetch of each package can take a while; a fetch that fails fails the file (never a
// skip). Ports 3185–3186 are this file's (moved by IDEMGATE_TEST_PORT_BASE).

const MEMORY = "@modelcontextprotocol/server-memory@2026.8.31";
const EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31";
const SCOPE = "demo"; // the scope of the API token a first start seeds

type Call = CallToolResult & { _meta?: { "io.idemgate/result"?: { status: number; key?: string; replayed?: boolean; executionId?: string } } };
type Entity = { name: string; entityType: string; observations: string[] };
type TimelineEvent = { type: string; executionId?: string; outcome?: string };

const text = (result: CallToolResult) => (result.content[0] as { text: string }).text;
const meta = (result: Call) => result._meta?.["io.idemgate/result"];
/**
 * Idemgate's refusal, a tool error with its problem body as text. For a tool that declares an
 * outputSchema (server-memory's all do) the body is nowhere else: the SDK v1 client checks even an
 * error's structuredContent against the schema (and so may a client on either revision). For the others it is the structuredContent too.
 */
const refusal = (result: CallToolResult, declaresOutputSchema = true) => {
  expect(result.isError).toBe(true);
  const problem = JSON.parse(text(result)) as { type: string; detail: string };
  if (declaresOutputSchema) expect(result.structuredContent).toBeUndefined();
  else expect(result.structuredContent).toEqual(problem);
  return problem;
};

/** The servers' declarations: what the tests below observe of each gating rule. */
function configYaml(dir: string): string {
  const node = JSON.stringify(process.execPath);
  const memory = (name: string, extra = "") =>
    `  - name: ${name}\n    command: ${node}\n    args: [${JSON.stringify(scripts.memory)}]\n    env: { MEMORY_FILE_PATH: ${JSON.stringify(path.join(dir, `${name}.jsonl`))} }\n    timeoutMs: 30000\n${extra}`;
  return [
    "mcpServers:",
    memory("memory"),
    memory("memory_always", "    gate: always\n    tools: { search_nodes: { gate: by-annotations } }\n"),
    memory("memory_never", "    gate: never\n"),
    `  - name: everything\n    command: ${node}\n    args: [${JSON.stringify(scripts.everything)}, "stdio"]\n    timeoutMs: 30000\n    tools: { trigger-long-running-operation: { gate: always } }\n`,
  ].join("\n");
}

/** each package's own script (its `bin`), where npx installed it */
const scripts = { memory: "", everything: "" };

// Fetched once into npx's cache before any server starts, so a registry that cannot be reached fails
// here, saying so, rather than as servers that never connect.
beforeAll(async () => {
  const installed = async (pkg: string, bin: string) => {
    const { stdout } = await promisify(execFile)("npx", ["--yes", "--package", pkg, "--", "sh", "-c", `realpath "$(command -v ${bin})"`], { cwd: ROOT, timeout: 240_000 }).catch(
      (err: { stderr?: string; message: string }) => {
        throw new Error(`npx could not fetch ${pkg}: ${err.stderr || err.message}`);
      },
    );
    const script = stdout.trim();
    if (!script.endsWith(".js")) throw new Error(`npx installed ${pkg} but its ${bin} script was not found (${JSON.stringify(stdout)})`);
    return script;
  };
  scripts.memory = await installed(MEMORY, "mcp-server-memory");
  scripts.everything = await installed(EVERYTHING, "mcp-server-everything");
}, 500_000);

const configurations = [
  { name: "embedded (PGlite)", port: testPort(3185), servers: false },
  { name: "Redis and PostgreSQL", port: testPort(3186), servers: true },
] as const;

describe.each(configurations)("the reference MCP servers guarded on the $name configuration", (configuration) => {
  const dataDir = `.data/fault-mcp-reference-${configuration.port}`;
  const prefix = `idgfault-mcpref-${randomUUID().slice(0, 6)}`;
  let pg: Awaited<ReturnType<typeof createTestPostgres>> | null = null;
  let dir: string;
  let server: RunningServer;
  let token: string;
  const clients = new Map<string, Client>();
  /** the client of the revision the cases below run on now */
  let client: Client;
  let revision: string;
  let tools: Tool[];

  const call = (name: string, args: Record<string, unknown>, key?: string) => {
    expect(client.getNegotiatedProtocolVersion()).toBe(revision);
    return client.callTool({ name, arguments: args, ...(key ? { idempotencyKey: key } : {}) } as never) as Promise<Call>;
  };
  const entity = (name: string): Entity => ({ name, entityType: "order", observations: [`placed by ${name}`] });
  /** the graph as the server's read_graph answers it, through the guard (a read: no key) */
  const graph = async (server: string) => {
    const read = await call(`${server}.read_graph`, {});
    expect(read.isError, text(read)).toBeFalsy();
    return read.structuredContent as { entities: Entity[] };
  };
  /** the entities of that name in the server's own file */
  const inFile = async (server: string, name: string) =>
    (await readFile(path.join(dir, `${server}.jsonl`), "utf8").catch(() => ""))
      .split("\n")
      .filter((line) => line.trim() && (JSON.parse(line) as { type: string; name?: string }).type === "entity" && JSON.parse(line).name === name).length;
  /** the key's audit trail, through the API as a tenant reads it */
  const keyDetail = async (key: string) => {
    const res = await fetch(`${server.url}/api/v1/keys/${SCOPE}/${encodeURIComponent(key)}`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    return (await res.json()) as { state: string; timeline: TimelineEvent[] };
  };
  const executions = async (key: string) => (await keyDetail(key)).timeline.filter((e) => e.type === "intent").length;
  async function until<T>(what: string, read: () => Promise<T>, ok: (value: T) => boolean, attempts = 600): Promise<T> {
    for (let i = 0; i < attempts; i++) {
      const value = await read();
      if (ok(value)) return value;
      await sleep(200);
    }
    throw new Error(`${what} did not happen:\n${server.output().slice(-4000)}`);
  }

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "idemgate-mcp-reference-"));
    const file = path.join(dir, "idemgate.config.yaml");
    await writeFile(file, configYaml(dir));
    await removeDataDir(dataDir);
    const env: Record<string, string> = { IDEMGATE_CONFIG: file, IDEMGATE_RECONCILE_INTERVAL_MS: "0" };
    if (configuration.servers) {
      pg = await createTestPostgres("fault_mcp_reference");
      Object.assign(env, { DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, IDEMGATE_REDIS_PREFIX: prefix });
    }
    server = await startServer({ port: configuration.port, dataDir, env });
    token = (await server.credentials()).apiToken;
    for (const { revision } of REVISIONS) clients.set(revision, await connectOnRevision(`${server.url}/mcp`, token, revision, "fault-mcp-reference"));
    // the four servers connect in the background once the server is up (node starts each)
    const expected = ["memory.create_entities", "memory_always.read_graph", "memory_never.create_entities", "everything.echo"];
    await until(
      "the four reference servers connecting",
      async () => (await clients.get("2025-11-25")!.listTools()).tools,
      (listed) => expected.every((name) => listed.some((t) => t.name === name)),
    );
  }, 240_000);

  afterAll(async () => {
    await Promise.all([...clients.values()].map((c) => c.close().catch(() => {})));
    await server?.stop();
    await deleteRedisPrefix(prefix);
    await pg?.drop();
    await removeDataDir(dataDir);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  describe.each(REVISIONS)("with the v2 client on $revision", (current) => {
    beforeAll(async () => {
      revision = current.revision;
      client = clients.get(revision)!;
      expect(client.getNegotiatedProtocolVersion()).toBe(revision);
      tools = (await client.listTools()).tools;
    });

    it("lists their tools with what each server declares (annotations, title, outputSchema) and how each is gated", () => {
      const tool = (name: string) => {
        const found = tools.find((t) => t.name === name);
        expect(found, name).toBeDefined();
        return found!;
      };
      const kind = (name: string) => tool(name)._meta?.["io.idemgate/kind"];
      // server-memory declares create_entities a non-idempotent write, read_graph a read, delete_entities idempotent
      expect(tool("memory.create_entities").annotations).toEqual({ readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false });
      expect(tool("memory.create_entities")).toMatchObject({ title: "Create Entities", outputSchema: { type: "object", required: ["entities"] } });
      expect(tool("memory.create_entities")._meta).toMatchObject({ "io.idemgate/kind": "write", "io.idemgate/idempotency-key": "required", "io.idemgate/origin": { server: "memory", tool: "create_entities" } });
      expect(tool("memory.read_graph").annotations).toMatchObject({ readOnlyHint: true });
      expect(tool("memory.delete_entities").annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true, idempotentHint: true });
      expect([kind("memory.read_graph"), kind("memory.delete_entities")]).toEqual(["read", "read"]);
      // gate: always makes every tool a gated write but the one its per-tool override sets back
      expect([kind("memory_always.read_graph"), kind("memory_always.delete_entities"), kind("memory_always.search_nodes")]).toEqual(["write", "write", "read"]);
      expect(tool("memory_always.read_graph").annotations).toMatchObject({ readOnlyHint: true }); // listed as the server declares it
      // gate: never: nothing gated
      expect([kind("memory_never.create_entities"), kind("memory_never.read_graph")]).toEqual(["read", "read"]);

      // server-everything: its tools with their hyphens made into Idemgate names, as declared
      expect(tool("everything.echo")).toMatchObject({ title: "Echo Tool", annotations: { readOnlyHint: true, idempotentHint: true }, _meta: { "io.idemgate/kind": "read" } });
      expect(tool("everything.get_structured_content")).toMatchObject({ title: "Get Structured Content Tool", outputSchema: { type: "object" } });
      expect(tool("everything.toggle_subscriber_updates")).toMatchObject({ annotations: { readOnlyHint: false, idempotentHint: false }, _meta: { "io.idemgate/kind": "write" } });
      expect(tool("everything.trigger_long_running_operation")).toMatchObject({
        annotations: { readOnlyHint: true },
        _meta: { "io.idemgate/kind": "write", "io.idemgate/origin": { server: "everything", tool: "trigger-long-running-operation" } },
      });
    });

    it("memory, by annotations: create_entities five times at once and five times in a row with one key creates once, every answer identical", async () => {
      const name = `order-${randomUUID().slice(0, 8)}`;
      const key = `mcpref-${randomUUID()}`;
      const args = { entities: [entity(name)] };
      const together = await Promise.all(Array.from({ length: 5 }, () => call("memory.create_entities", args, key)));
      const inARow: Call[] = [];
      for (let i = 0; i < 5; i++) inARow.push(await call("memory.create_entities", args, key));
      for (const result of [...together, ...inARow]) {
        expect(result.isError, text(result)).toBeFalsy();
        expect(result.content).toEqual(together[0].content);
        expect(result.structuredContent).toEqual({ entities: [entity(name)] });
      }
      // one ran; the others were answered from the store
      expect([...together, ...inARow].filter((r) => meta(r)?.replayed === false)).toHaveLength(1);
      for (const result of inARow) expect(meta(result)).toMatchObject({ replayed: true, key });
      expect((await graph("memory")).entities.filter((e) => e.name === name)).toHaveLength(1);
      expect(await inFile("memory", name)).toBe(1);
      expect(await executions(key)).toBe(1);

      // a different key is a second action: it runs, and the server answers as it does to a second
      // create of an entity it has (it creates nothing it already has)
      const second = await call("memory.create_entities", args, `mcpref-${randomUUID()}`);
      expect(meta(second)).toMatchObject({ replayed: false });
      expect(second.structuredContent).toEqual({ entities: [] });
      expect(await inFile("memory", name)).toBe(1);
    });

    it("memory, by annotations: a keyless write is refused and changes nothing; read_graph needs no key and is not gated; delete_entities (idempotentHint) passes through, audited", async () => {
      const name = `order-${randomUUID().slice(0, 8)}`;
      const keyless = await call("memory.create_entities", { entities: [entity(name)] });
      expect(refusal(keyless)).toMatchObject({ type: "/problems/missing_key", detail: expect.stringContaining("params.idempotencyKey") });
      expect((await graph("memory")).entities.map((e) => e.name)).not.toContain(name);
      expect(await inFile("memory", name)).toBe(0);

      // a read: answered with no key, reserved nothing, recorded as no execution
      const read = await call("memory.read_graph", {});
      expect(meta(read)).toEqual({ status: 200 });

      await call("memory.create_entities", { entities: [entity(name)] }, `mcpref-${randomUUID()}`);
      const deleted = await call("memory.delete_entities", { entityNames: [name] });
      expect(deleted.isError, text(deleted)).toBeFalsy();
      expect(meta(deleted)).toEqual({ status: 200, executionId: expect.any(String) });
      expect(await inFile("memory", name)).toBe(0);
      const trail = await until("the pass-through's outcome in the audit log", () => keyDetail(`passthrough:${meta(deleted)!.executionId}`), (d) => d.timeline.some((e) => e.type === "outcome"));
      expect(trail.timeline.map((e) => e.type)).toEqual(["intent", "outcome"]);
    });

    it("memory_always, gate: always: read_graph needs a key and replays the graph it first read; search_nodes, set back by its own gate, does not", async () => {
      const keyless = await call("memory_always.read_graph", {});
      expect(refusal(keyless)).toMatchObject({ type: "/problems/missing_key" });

      const readKey = `mcpref-read-${randomUUID()}`;
      const before = await call("memory_always.read_graph", {}, readKey);
      expect(meta(before)).toMatchObject({ replayed: false, key: readKey });
      const name = `order-${randomUUID().slice(0, 8)}`;
      await call("memory_always.create_entities", { entities: [entity(name)] }, `mcpref-${randomUUID()}`);
      expect(await inFile("memory_always", name)).toBe(1);

      // the same key: the first answer, from the store, without the entity created since
      const again = await call("memory_always.read_graph", {}, readKey);
      expect(meta(again)).toMatchObject({ replayed: true, key: readKey });
      expect(again.content).toEqual(before.content);
      expect((again.structuredContent as { entities: Entity[] }).entities.map((e) => e.name)).not.toContain(name);
      expect(await executions(readKey)).toBe(1);
      // a new key reads it afresh
      const fresh = await call("memory_always.read_graph", {}, `mcpref-read-${randomUUID()}`);
      expect((fresh.structuredContent as { entities: Entity[] }).entities.map((e) => e.name)).toContain(name);

      // the per-tool override: search_nodes is a read again, answered without a key
      const found = await call("memory_always.search_nodes", { query: name });
      expect(found.isError, text(found)).toBeFalsy();
      expect(meta(found)).toEqual({ status: 200 });
      expect((found.structuredContent as { entities: Entity[] }).entities.map((e) => e.name)).toEqual([name]);
    });

    it("memory_never, gate: never: create_entities passes through without a key, each call runs, and each is in the audit log", async () => {
      const name = `order-${randomUUID().slice(0, 8)}`;
      const args = { entities: [entity(name)] };
      const first = await call("memory_never.create_entities", args);
      const second = await call("memory_never.create_entities", args);
      expect(first.isError, text(first)).toBeFalsy();
      // the second call reached the server (nothing replayed): it had the entity already
      expect(first.structuredContent).toEqual({ entities: [entity(name)] });
      expect(second.structuredContent).toEqual({ entities: [] });
      expect(await inFile("memory_never", name)).toBe(1);
      for (const result of [first, second]) {
        expect(meta(result)).toEqual({ status: 200, executionId: expect.any(String) });
        const trail = await until("the pass-through's outcome in the audit log", () => keyDetail(`passthrough:${meta(result)!.executionId}`), (d) => d.timeline.some((e) => e.type === "outcome"));
        expect(trail.timeline).toEqual([
          expect.objectContaining({ type: "intent", executionId: meta(result)!.executionId }),
          expect.objectContaining({ type: "outcome", executionId: meta(result)!.executionId, outcome: "succeeded" }),
        ]);
      }
    });

    it("everything: toggle_subscriber_updates with one key toggles once (five at once, then a replay); the next key toggles back", async () => {
      const key = `mcpref-toggle-${randomUUID()}`;
      const together = await Promise.all(Array.from({ length: 5 }, () => call("everything.toggle_subscriber_updates", {}, key)));
      for (const result of together) expect(result.content).toEqual(together[0].content);
      expect(text(together[0])).toMatch(/^Started simulated resource updated notifications/);
      const replay = await call("everything.toggle_subscriber_updates", {}, key);
      expect(meta(replay)).toMatchObject({ replayed: true, key });
      expect(replay.content).toEqual(together[0].content);
      expect(await executions(key)).toBe(1);
      // had the key run twice, the updates would be off again and this toggle would start them
      const next = await call("everything.toggle_subscriber_updates", {}, `mcpref-toggle-${randomUUID()}`);
      expect(text(next)).toMatch(/^Stopped simulated resource updates/);
      const keyless = await call("everything.toggle_subscriber_updates", {});
      expect(refusal(keyless, false)).toMatchObject({ type: "/problems/missing_key" });
    });

    it("everything: the long-running operation, gated by its own gate: a retry during the run waits for it and gets its result, one run", async () => {
      const keyless = await call("everything.trigger_long_running_operation", { duration: 1, steps: 1 });
      expect(refusal(keyless, false)).toMatchObject({ type: "/problems/missing_key" });

      const key = `mcpref-long-${randomUUID()}`;
      const args = { duration: 3, steps: 3 };
      const first = call("everything.trigger_long_running_operation", args, key);
      await until("the operation running", () => keyDetail(key), (d) => d.state === "inflight");
      const retry = await call("everything.trigger_long_running_operation", args, key);
      const ran = await first;
      expect(text(ran)).toBe("Long running operation completed. Duration: 3 seconds, Steps: 3.");
      expect(meta(ran)).toMatchObject({ replayed: false, key });
      expect(meta(retry)).toMatchObject({ replayed: true, key });
      expect(retry.content).toEqual(ran.content);
      expect(await executions(key)).toBe(1);
    });
  });
});
