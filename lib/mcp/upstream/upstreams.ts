import { Client, specTypeSchemas, StreamableHTTPClientTransport, type CallToolResult, type CreateTaskResult, type Tool } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { AsyncLocalStorage } from "node:async_hooks";
import { z } from "zod";
import { outboundFetch } from "@/lib/http/outbound-fetch";
import packageJson from "@/package.json";
import { DEFAULT_MCP_TIMEOUT_MS, isStdio, type McpServerConfig } from "./config";
import { McpNotSentError, notSentError } from "./not-sent";
import { isCreateTaskResult, proxiedTool, type McpCallTarget, type ProxiedToolDefinition, type TaskMethod } from "./proxied-tool";

/** How a guarded MCP server is doing, for the status page. */
export interface UpstreamStatus {
  name: string;
  transport: "http" | "stdio";
  /** where: the URL, or the command */
  target: string;
  state: "connecting" | "up" | "down";
  /** the MCP revision of the current connection (2026-07-28 where the server speaks it, else 2025-11-25 or older); null until connected */
  protocolVersion: string | null;
  since: Date;
  /** why it is down (or why the last attempt failed) */
  error: string | null;
  tools: number;
}

export interface UpstreamOptions {
  /** called with every guarded tool whenever a server's list changes (connected, re-listed, changed) */
  onChange?: (tools: ProxiedToolDefinition[]) => void;
  log?: (line: string) => void;
  /** a connected server is pinged this often; one that misses two pings in a row is reconnected (default 5 s) */
  pingIntervalMs?: number;
  /** how long a ping may take (default 5 s) */
  pingTimeoutMs?: number;
  /** the longest wait between reconnection attempts (default 30 s) */
  maxBackoffMs?: number;
}

const CONNECT_TIMEOUT_MS = 10_000;
/** A `tools/call` answer before it is told apart: a tool result, or a task the server created. */
const AnyResultSchema = z.looseObject({});
const MAX_LISTED_PAGES = 20;

/**
 * The HTTP statuses of the POSTs made for one call, noted by the transport's fetch (a redirect's hop
 * is not an answer and is left out). On 2026-07-28 the v2 transport hands a 400 that carries a
 * JSON-RPC error to the caller as that error (a ProtocolError), not as an HTTP error: the status says
 * the server refused the call before processing it — but only when the call's own POST is the one
 * POST made for it. Anything more (a cancellation, a resend after authenticating, a retry the SDK
 * makes) leaves the status untold, and the outcome unknown.
 */
const postStatuses = new AsyncLocalStorage<number[]>();
const statusNotingFetch = async (url: string | URL, init?: RequestInit): Promise<Response> => {
  const response = await outboundFetch(url, init);
  const statuses = postStatuses.getStore();
  if (statuses && init?.method === "POST" && !(response.status >= 300 && response.status < 400)) statuses.push(response.status);
  return response;
};

/**
 * One guarded MCP server: connects as an MCP client, lists its tools, re-lists them when the server
 * says they changed (`notifications/tools/list_changed`), pings it, and when it goes away (a stdio
 * process that exits, an HTTP server that stops answering) reconnects with backoff — restarting a
 * stdio server's process — without restarting Idemgate. The last tool list is kept while it is down:
 * calls then are refused as "not run" (nothing was sent).
 */
export class UpstreamConnection implements McpCallTarget {
  private client: Client | null = null;
  private state: UpstreamStatus["state"] = "connecting";
  private since = new Date();
  private error: string | null = null;
  private listed: Tool[] = [];
  private closed = false;
  private pingTimer: NodeJS.Timeout | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private attempt = 0;
  private generation = 0;
  private missedPings = 0;
  readonly timeoutMs: number;

  constructor(
    readonly config: McpServerConfig,
    private readonly options: UpstreamOptions & { onTools: () => void },
  ) {
    this.timeoutMs = config.timeoutMs ?? DEFAULT_MCP_TIMEOUT_MS;
  }

  get name(): string {
    return this.config.name;
  }

  /** The first connection attempt; later ones run by themselves. Never throws. */
  async start(): Promise<void> {
    await this.connect();
  }

  status(): UpstreamStatus {
    return {
      name: this.name,
      transport: isStdio(this.config) ? "stdio" : "http",
      target: isStdio(this.config) ? [this.config.command, ...(this.config.args ?? [])].join(" ") : this.config.url,
      state: this.state,
      protocolVersion: this.state === "up" ? (this.client?.getNegotiatedProtocolVersion() ?? null) : null,
      since: this.since,
      error: this.error,
      tools: this.listed.length,
    };
  }

  tools(): Tool[] {
    return this.listed;
  }

  connected(): boolean {
    return this.state === "up" && this.client !== null;
  }

  acceptsTasks(): boolean {
    return this.client?.getServerCapabilities()?.tasks?.requests?.tools?.call !== undefined;
  }

  async taskRequest(method: TaskMethod, params: { taskId: string }, timeoutMs: number): Promise<Record<string, unknown>> {
    const client = this.client;
    if (!client) throw new McpNotSentError(`not connected to ${this.name}`);
    return client.request({ method, params }, AnyResultSchema, { timeout: timeoutMs });
  }

  /** @throws McpNotSentError when the server certainly did not process the call (not-sent.ts) */
  async callTool(params: Record<string, unknown>, timeoutMs: number): Promise<CallToolResult | CreateTaskResult> {
    const client = this.client;
    if (!client) throw new McpNotSentError(`not connected to ${this.name}`);
    const sentSessionId = sessionIdOf(client) !== undefined;
    const posts: number[] = [];
    try {
      const answer = await postStatuses.run(posts, () => client.request({ method: "tools/call", params: params as { name: string } }, AnyResultSchema, { timeout: timeoutMs }));
      // a task the server created is passed on as it came; anything else must be a tool result
      return isCreateTaskResult(answer) ? answer : toolResult(answer);
    } catch (err) {
      const notSent = notSentError(err, sentSessionId, posts.length === 1 ? posts[0] : undefined);
      if (notSent?.refused && client === this.client) {
        // a refused connection is the server down now: the calls after this one are refused
        // without trying until it is back, rather than after two missed pings
        this.lost(notSent.reason);
      } else if (notSent?.sessionGone && client === this.client) {
        // The server restarted (or ended our session): it is up, but this session is gone for good.
        // This call is not run (the caller retries it: nothing was processed) and a new session is
        // opened at once, so the retry runs. The call is not resent here by itself: the new session
        // may list other tools or take longer than this call's timeout, and a caller's retry
        // decides afresh against the new tool list.
        this.lost(notSent.reason, true);
      } else if (!notSent) {
        // a failed call may mean the server went away: find out now rather than at the next ping
        this.checkSoon();
      }
      throw notSent ?? err;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.clearTimers();
    const client = this.client;
    this.client = null;
    await client?.close().catch(() => {});
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const generation = ++this.generation;
    this.setState(this.state === "down" ? "down" : "connecting", this.error);
    const client = new Client(
      { name: "idemgate", version: packageJson.version },
      {
        // 2026-07-28 where the server speaks it (server/discover), else the 2025-11-25 handshake
        versionNegotiation: { mode: "auto" },
        // on list_changed the tools are re-listed as on connecting (listAll: the first pages of a
        // server with more than the cap, rather than the SDK's listing, which refuses such a server)
        listChanged: {
          tools: {
            autoRefresh: false,
            onChanged: (err) => {
              if (generation !== this.generation) return;
              if (err) return this.options.log?.(`${this.name}: re-listing tools failed: ${err.message}`);
              listAll(client).then(
                (tools) => generation === this.generation && this.setTools(tools),
                (failed: Error) => this.options.log?.(`${this.name}: re-listing tools failed: ${failed.message}`),
              );
            },
          },
        },
      },
    );
    const transport = isStdio(this.config)
      ? new StdioClientTransport({ command: this.config.command, args: this.config.args, env: this.config.env, cwd: this.config.cwd, stderr: "pipe" })
      : new StreamableHTTPClientTransport(new URL(this.config.url), { requestInit: { headers: this.config.headers ?? {} }, fetch: statusNotingFetch });
    if (transport instanceof StdioClientTransport) {
      transport.stderr?.on("data", (chunk: Buffer) => {
        for (const line of chunk.toString().split("\n")) if (line.trim()) this.options.log?.(`${this.name} (stderr): ${line.slice(0, 500)}`);
      });
    }
    try {
      await client.connect(transport, { timeout: CONNECT_TIMEOUT_MS });
      // from here on a close means the server went away; before, a failed connection says why itself
      client.onclose = () => {
        if (generation === this.generation) this.lost("the connection closed");
      };
      const tools = await listAll(client);
      if (this.closed || generation !== this.generation) {
        await client.close().catch(() => {});
        return;
      }
      this.client = client;
      this.attempt = 0;
      this.missedPings = 0;
      this.setTools(tools);
      this.setState("up", null);
      this.options.log?.(`${this.name}: connected, ${tools.length} tools`);
      this.schedulePing(this.options.pingIntervalMs ?? 5_000);
    } catch (err) {
      await client.close().catch(() => {});
      if (generation === this.generation) this.lost(`cannot connect: ${describe(err)}`);
    }
  }

  private setTools(tools: Tool[]): void {
    this.listed = tools;
    // a per-tool `gate` for a tool the server does not offer (a typo, or a tool it dropped) is no
    // reason to stop serving the others: it is said once per listing
    const offered = new Set(tools.map((t) => t.name));
    for (const name of Object.keys(this.config.tools ?? {})) {
      if (!offered.has(name)) this.options.log?.(`${this.name}: tools.${name} is declared, but the server offers no tool of that name`);
    }
    this.options.onTools();
  }

  private setState(state: UpstreamStatus["state"], error: string | null): void {
    if (state !== this.state) this.since = new Date();
    this.state = state;
    this.error = error;
  }

  /** The server went away: mark it down and reconnect with backoff (at once when `now`). */
  private lost(reason: string, now = false): void {
    if (this.closed) return;
    this.generation++;
    this.clearTimers();
    const client = this.client;
    this.client = null;
    void client?.close().catch(() => {});
    if (this.state !== "down" || this.error !== reason) this.options.log?.(`${this.name}: down (${reason})`);
    this.setState("down", reason);
    const delay = now ? 0 : Math.min(this.options.maxBackoffMs ?? 30_000, 250 * 2 ** Math.min(this.attempt++, 10));
    this.retryTimer = setTimeout(() => void this.connect(), delay);
    this.retryTimer.unref();
  }

  private schedulePing(delayMs: number): void {
    if (this.pingTimer) clearTimeout(this.pingTimer);
    const generation = this.generation;
    this.pingTimer = setTimeout(async () => {
      const client = this.client;
      if (!client || generation !== this.generation) return;
      try {
        await client.ping({ timeout: this.options.pingTimeoutMs ?? 5_000 });
        this.missedPings = 0;
        if (generation === this.generation) this.schedulePing(this.options.pingIntervalMs ?? 5_000);
      } catch (err) {
        if (generation !== this.generation) return;
        const notSent = notSentError(err, sessionIdOf(client) !== undefined);
        // a refused connection or a forgotten session is certain; one slow answer on a busy
        // machine is not a server gone: it must miss two in a row
        if (notSent?.refused || notSent?.sessionGone) this.lost(notSent.reason, notSent.sessionGone);
        else if (++this.missedPings >= 2) this.lost(`did not answer two pings: ${describe(err)}`);
        else this.schedulePing(this.options.pingIntervalMs ?? 5_000);
      }
    }, delayMs);
    this.pingTimer.unref();
  }

  private checkSoon(): void {
    if (this.state === "up") this.schedulePing(0);
  }

  private clearTimers(): void {
    if (this.pingTimer) clearTimeout(this.pingTimer);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.pingTimer = this.retryTimer = null;
  }
}

/** Every guarded MCP server of IDEMGATE_MCP_SERVERS, and their tools as Idemgate tools. */
export class McpUpstreams {
  readonly connections: UpstreamConnection[];

  constructor(
    configs: McpServerConfig[],
    private readonly options: UpstreamOptions = {},
  ) {
    this.connections = configs.map((config) => new UpstreamConnection(config, { ...options, onTools: () => this.changed() }));
  }

  /** Connects to every server once (a server that is down is retried in the background). */
  async start(): Promise<void> {
    await Promise.all(this.connections.map((c) => c.start()));
  }

  statuses(): UpstreamStatus[] {
    return this.connections.map((c) => c.status());
  }

  /** Every server's tools as `<server>.<tool>`, a down server's as last listed. */
  tools(): ProxiedToolDefinition[] {
    const out: ProxiedToolDefinition[] = [];
    const seen = new Set<string>();
    for (const connection of this.connections) {
      for (const listed of connection.tools()) {
        const { gate, tools } = connection.config;
        const tool = proxiedTool({ name: connection.name, timeoutMs: connection.timeoutMs, gate, tools }, listed, connection);
        if (!tool) {
          this.options.log?.(`${connection.name}: the tool ${JSON.stringify(listed.name)} has a name Idemgate cannot serve; left out`);
        } else if (seen.has(tool.name)) {
          this.options.log?.(`${connection.name}: two tools map to ${tool.name}; the second is left out`);
        } else {
          seen.add(tool.name);
          out.push(tool);
        }
      }
    }
    return out;
  }

  async close(): Promise<void> {
    await Promise.all(this.connections.map((c) => c.close()));
  }

  private changed(): void {
    this.options.onChange?.(this.tools());
  }
}

/** The first MAX_LISTED_PAGES pages of the server's tools, each fetched afresh (never from the SDK's cache). */
async function listAll(client: Client): Promise<Tool[]> {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_LISTED_PAGES; page++) {
    const result = await client.request({ method: "tools/list", params: cursor ? { cursor } : {} }, { timeout: CONNECT_TIMEOUT_MS });
    tools.push(...result.tools);
    cursor = result.nextCursor;
    if (!cursor) break;
  }
  return tools;
}

/** A tools/call answer that is not a task, checked to be a tool result (else the outcome is unknown). */
function toolResult(answer: unknown): CallToolResult {
  const checked = specTypeSchemas.CallToolResult["~standard"].validate(answer);
  if (checked.issues) throw new Error(`the answer to tools/call is not a tool result: ${checked.issues.map((i) => i.message).join("; ").slice(0, 300)}`);
  return checked.value as CallToolResult;
}

/** The Streamable HTTP session the client's requests carry (none over stdio). */
function sessionIdOf(client: Client): string | undefined {
  return client.transport instanceof StreamableHTTPClientTransport ? client.transport.sessionId : undefined;
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as { cause?: unknown }).cause;
  return (cause instanceof Error ? `${err.message}: ${cause.message}` : err.message).slice(0, 300);
}
