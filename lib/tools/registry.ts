import type { PrismaClient } from "@/generated/prisma/client";
import { ClientRunToolError, InvalidArgumentsError, UnknownToolError } from "@/lib/idempotency/errors";
import type { ProbeTool, RunTool } from "@/lib/idempotency/tool";
import { toJsonSchema, type JsonSchema, type ToolDescription } from "./api-schemas";
import { defineTools, type ToolDefinition } from "./define-tool";
import { buildOpenApiDocument, type OpenApiDocument } from "./openapi";
import type { SideEffect } from "./effects";
import { prismaResendLog } from "./resend-log";
import { upstreamProber, upstreamResendProber, upstreamRunner } from "./upstream";
import { requestArgumentIssues } from "./upstream-request";

export type { JsonSchema, ToolDescription };

export interface RegistryOptions {
  /** the upstream runners' fetch (tests, proxies) */
  fetch?: typeof fetch;
}

function issuePath(path: readonly PropertyKey[]): string {
  return path.length === 0 ? "(arguments)" : path.map((p) => (typeof p === "number" ? `[${p}]` : String(p))).join(".").replaceAll(".[", "[");
}

/** Origins whose OpenAPI text one registry keeps (the oldest goes first). */
const OPENAPI_ORIGINS_KEPT = 8;

/** The configured tools: lookup, argument validation, runners and their documentation. */
export class ToolRegistry {
  private readonly tools: ReadonlyMap<string, ToolDefinition>;
  private readonly fetchImpl: typeof fetch | undefined;
  private readonly runners = new WeakMap<PrismaClient, WeakMap<ToolDefinition, RunTool>>();
  private readonly openApiCache = new Map<string, string>();

  constructor(tools: readonly ToolDefinition[], options: RegistryOptions = {}) {
    this.tools = new Map(defineTools(tools).map((t) => [t.name, t]));
    this.fetchImpl = options.fetch;
  }

  /** @throws UnknownToolError (404) */
  get(name: string): ToolDefinition {
    const tool = this.tools.get(name);
    if (!tool) throw new UnknownToolError(name);
    return tool;
  }

  has(name: string): boolean {
    return this.tools.has(name);
  }

  /** In configuration order. */
  list(): ToolDefinition[] {
    return [...this.tools.values()];
  }

  /**
   * The arguments as the tool will see them; run this before the engine, so invalid arguments are
   * a 400 that reserves no key. A missing body counts as `{}`.
   * @throws InvalidArgumentsError listing each problem with its path
   */
  parseArgs(tool: ToolDefinition, raw: unknown): Record<string, unknown> {
    const parsed = tool.schema.safeParse(raw === undefined || raw === null ? {} : raw);
    if (parsed.success) {
      const args = parsed.data as Record<string, unknown>;
      // a request that cannot be built (a path argument missing) is refused here, before any key is held
      const unsendable = tool.upstream ? requestArgumentIssues(tool.upstream, args) : [];
      if (unsendable.length === 0) return args;
      throw new InvalidArgumentsError(`invalid arguments for ${tool.name}: ${unsendable.map((i) => `${i.path}: ${i.message}`).join("; ")}`, unsendable);
    }
    const issues = parsed.error.issues.flatMap((issue) =>
      // One issue per unknown argument, named by its own path, reads better than zod's list on the parent.
      issue.code === "unrecognized_keys"
        ? issue.keys.map((key) => ({ path: issuePath([...issue.path, key]), message: `is not an argument of ${tool.name}` }))
        : [{ path: issuePath(issue.path), message: issue.message }],
    );
    const summary = issues.map((i) => `${i.path}: ${i.message}`).join("; ");
    throw new InvalidArgumentsError(`invalid arguments for ${tool.name}: ${summary}`, issues);
  }

  /**
   * What the engine runs for this tool: the in-process function bound to `db`, or the forwarder.
   * Made once per tool and database (every call asks for it, replays too).
   * @throws ClientRunToolError (400) for a tool that runs in its caller's process
   */
  runnerFor(tool: ToolDefinition, db: PrismaClient): RunTool {
    if (tool.runs === "client") throw new ClientRunToolError(tool.name);
    let runners = this.runners.get(db);
    if (!runners) this.runners.set(db, (runners = new WeakMap()));
    let runner = runners.get(tool);
    if (!runner) runners.set(tool, (runner = this.makeRunner(tool, db)));
    return runner;
  }

  private makeRunner(tool: ToolDefinition, db: PrismaClient): RunTool {
    if (tool.upstream) return upstreamRunner(tool.upstream, this.fetchImpl, tool.upstream.probe === "resend" ? prismaResendLog(db) : undefined, tool.name);
    if (!tool.run) throw new ClientRunToolError(tool.name);
    const run = tool.run.bind(tool);
    return (args, ctx) => run(args as Record<string, unknown>, { ...ctx, db });
  }

  /**
   * The tool's status probe, or null when it cannot tell whether a call happened: an upstream's
   * `statusUrl` or `probe: resend` (the same request sent again), or an in-process `probe` bound to `db`.
   */
  /** Whether the tool's status probe sends the call again (`probe: resend`): a request the service may apply, not a read. */
  probeResends(tool: ToolDefinition): boolean {
    return tool.upstream?.probe === "resend" && tool.upstream.keyRetentionMs !== undefined;
  }

  proberFor(tool: ToolDefinition, db: PrismaClient): ProbeTool | null {
    if (tool.upstream) {
      const { statusUrl, probe, keyRetentionMs } = tool.upstream;
      if (this.probeResends(tool) && keyRetentionMs !== undefined) return upstreamResendProber({ ...tool.upstream, keyRetentionMs }, prismaResendLog(db), this.fetchImpl, Date.now, tool.name);
      return statusUrl ? upstreamProber({ ...tool.upstream, statusUrl }, this.fetchImpl) : null;
    }
    if (typeof tool.probe !== "function") return null;
    const probe = tool.probe.bind(tool);
    return (ctx) => probe({ ...ctx, db });
  }

  /** Every side effect the tools that can list theirs committed at or after `since`, oldest first. */
  async listEffects(db: PrismaClient, since: Date): Promise<SideEffect[]> {
    const lists = await Promise.all(this.list().flatMap((tool) => (tool.listEffects ? [tool.listEffects(db, since)] : [])));
    return lists.flat().sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime());
  }

  describe(tool: ToolDefinition): ToolDescription {
    return {
      name: tool.name,
      kind: tool.kind,
      description: tool.description,
      ttlMs: tool.ttlMs,
      leaseMs: tool.leaseMs,
      stuckPolicy: tool.stuckPolicy,
      fallbackTtlMs: tool.fallbackTtlMs,
      idempotencyKey: tool.kind === "read" ? "unused" : tool.fallbackTtlMs === null ? "required" : "optional",
      source: sourceOf(tool),
      argumentsSchema: tool.inputSchema ?? toJsonSchema(tool.schema),
      resultSchema: tool.resultSchema ? toJsonSchema(tool.resultSchema, "output") : null,
    };
  }

  /** OpenAPI 3.1 for the gateway, generated from the tools' zod schemas. */
  openApiDocument(baseUrl?: string): OpenApiDocument {
    return buildOpenApiDocument(
      this.list().map((t) => this.describe(t)),
      baseUrl,
    );
  }

  /**
   * The OpenAPI document as JSON text, rendered once per registry and origin. A registry's tools
   * never change (a config reload or an MCP server's list_changed builds a new registry), so the
   * cache lives and ends with it. Few origins are kept: the origin comes from the request's Host.
   */
  openApiJson(baseUrl?: string): string {
    const key = baseUrl ?? "";
    let json = this.openApiCache.get(key);
    if (json === undefined) {
      json = JSON.stringify(this.openApiDocument(baseUrl));
      if (this.openApiCache.size >= OPENAPI_ORIGINS_KEPT) this.openApiCache.delete(this.openApiCache.keys().next().value!);
      this.openApiCache.set(key, json);
    }
    return json;
  }
}

/**
 * Where a tool runs. A guarded MCP server's tool (built in lib/mcp/upstream with its origin
 * attached as `mcpOrigin`) runs at that server, not in Idemgate's process.
 */
function sourceOf(tool: ToolDefinition): ToolDescription["source"] {
  if ((tool as { mcpOrigin?: unknown }).mcpOrigin !== undefined) return "mcp";
  return tool.upstream ? "upstream" : tool.runs === "client" ? "client" : "in_process";
}
