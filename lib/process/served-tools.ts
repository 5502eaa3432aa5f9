import { isDeepStrictEqual } from "node:util";
import { mcpServersFromEnv, type McpServerConfig } from "@/lib/mcp/upstream/config";
import { setMcpStatusSource } from "@/lib/mcp/upstream/serve-upstreams";
import { McpUpstreams, type UpstreamOptions, type UpstreamStatus } from "@/lib/mcp/upstream/upstreams";
import type { Runtime } from "@/lib/server/runtime";
import { composeTools, ConfigFileError, configFilePath, loadToolConfig, type ToolConfig } from "@/lib/tools/config-file";
import type { ToolDefinition } from "@/lib/tools/define-tool";
import { ToolRegistry } from "@/lib/tools/registry";
import { setWebhookEndpoints } from "@/lib/notifications/endpoints";
import { setToolConfigStatus, type ToolConfigStatus } from "./tool-config-status";

export { toolConfigStatus, type ToolConfigStatus } from "./tool-config-status";

/** A refused configuration's problems, one per line, for the start-up error and the log. */
export function describeConfigError(err: unknown): string {
  if (err instanceof ConfigFileError) return `${err.file}:\n${err.problems.map((p) => `  ${p.path ? `${p.path}: ` : ""}${p.message}`).join("\n")}`;
  return err instanceof Error ? err.message : String(err);
}

export interface ServedToolsOptions {
  /** the tools of lib/tools/config.ts (demo tools, IDEMGATE_UPSTREAM_TOOLS) */
  builtIn: readonly ToolDefinition[];
  /** default: IDEMGATE_CONFIG */
  file?: string | null;
  /** default: IDEMGATE_MCP_SERVERS */
  envMcpServers?: McpServerConfig[];
  env?: Record<string, string | undefined>;
  log?: (line: string) => void;
  upstream?: Omit<UpstreamOptions, "onChange" | "log">;
}

/**
 * Every tool a server serves, and the one place that sets `runtime.registry`: the built-in tools,
 * the configuration file's tools, and the tools of the guarded MCP servers (IDEMGATE_MCP_SERVERS and
 * the file's `mcpServers:`). Whenever one of them changes — an MCP server's list, a reload of the
 * file — a new registry is built and put in place with one assignment; a call holds the registry it
 * started with (lib/gateway/invoke-tool.ts, lib/mcp/call-tool.ts), so calls already running finish
 * under their old definitions. A file that cannot be served is refused whole: at start it throws,
 * on reload the tools before it stay served and the refusal is kept for the status page.
 */
export class ServedTools {
  private readonly builtIn: readonly ToolDefinition[];
  private readonly file: string | null;
  private readonly envMcpServers: McpServerConfig[];
  private readonly env: Record<string, string | undefined>;
  private readonly log: (line: string) => void;
  private readonly upstreamOptions: Omit<UpstreamOptions, "onChange" | "log">;
  private config: ToolConfig | null;
  private runtime: Pick<Runtime, "registry"> | null = null;
  private envUpstreams: McpUpstreams | null = null;
  private fileUpstreams: McpUpstreams | null = null;
  private readonly status: ToolConfigStatus;
  private readonly shadowed = new Set<string>();
  private reloading: Promise<unknown> = Promise.resolve();

  /** Reads and checks the file (before anything is opened). @throws ConfigFileError */
  constructor(options: ServedToolsOptions) {
    this.builtIn = options.builtIn;
    this.env = options.env ?? process.env;
    this.file = options.file === undefined ? configFilePath(this.env) : options.file;
    this.envMcpServers = options.envMcpServers ?? mcpServersFromEnv(this.env as NodeJS.ProcessEnv);
    this.log = options.log ?? ((line) => console.log(`idemgate: ${line}`));
    this.upstreamOptions = options.upstream ?? {};
    this.config = this.file ? this.read(this.file) : null;
    this.status = { file: this.file, loadedAt: this.config ? new Date() : null, tools: this.config?.tools.length ?? 0, mcpServers: this.config?.mcpServers.length ?? 0, reloadError: null };
  }

  private read(file: string): ToolConfig {
    const config = loadToolConfig(file, this.env);
    composeTools(this.builtIn, config, this.envMcpServers);
    return config;
  }

  /** Serves the tools on `runtime` and connects to the MCP servers (one that is down is retried in the background). */
  async start(runtime: Pick<Runtime, "registry">): Promise<void> {
    this.runtime = runtime;
    setToolConfigStatus(this.status);
    setWebhookEndpoints(this.config?.webhooks ?? []);
    setMcpStatusSource({ statuses: () => this.mcpStatuses() });
    this.envUpstreams = this.upstreams(this.envMcpServers, () => this.envUpstreams);
    this.fileUpstreams = this.upstreams(this.config?.mcpServers ?? [], () => this.fileUpstreams);
    this.rebuild();
    await Promise.all([this.envUpstreams?.start(), this.fileUpstreams?.start()]);
  }

  /**
   * Reads the file again (SIGHUP). The new tools replace the old at once; a file with an error
   * changes nothing, and says why in the log and on the status page. Reloads never overlap.
   */
  reload(): Promise<{ ok: true } | { ok: false; message: string }> {
    const next = this.reloading.then(() => this.reloadNow());
    this.reloading = next.catch(() => {});
    return next;
  }

  private async reloadNow(): Promise<{ ok: true } | { ok: false; message: string }> {
    if (!this.file || !this.runtime) return { ok: false, message: "no configuration file (IDEMGATE_CONFIG) to reload" };
    let config: ToolConfig;
    try {
      config = this.read(this.file);
    } catch (err) {
      const message = describeConfigError(err);
      this.status.reloadError = { at: new Date(), message };
      this.log(`reloading ${this.file} was refused; the tools before it are still served:\n${message}`);
      return { ok: false, message };
    }
    const old = this.fileUpstreams;
    const sameServers = isDeepStrictEqual(this.config?.mcpServers ?? [], config.mcpServers);
    this.config = config;
    setWebhookEndpoints(config.webhooks);
    if (!sameServers) this.fileUpstreams = this.upstreams(config.mcpServers, () => this.fileUpstreams);
    this.rebuild();
    Object.assign(this.status, { loadedAt: new Date(), tools: config.tools.length, mcpServers: config.mcpServers.length, reloadError: null });
    this.log(`reloaded ${this.file}: ${config.tools.length} tools, ${config.mcpServers.length} MCP servers, ${config.webhooks.length} webhook endpoints`);
    if (!sameServers) {
      // calls still running on the old connections finish within their timeout before those close
      if (old) {
        const grace = Math.max(...old.connections.map((c) => c.timeoutMs)) + 1_000;
        setTimeout(() => void old.close(), grace).unref();
      }
      await this.fileUpstreams?.start();
    }
    return { ok: true };
  }

  async close(): Promise<void> {
    await Promise.all([this.envUpstreams?.close(), this.fileUpstreams?.close()]);
  }

  mcpStatuses(): UpstreamStatus[] {
    return [...(this.envUpstreams?.statuses() ?? []), ...(this.fileUpstreams?.statuses() ?? [])];
  }

  private upstreams(configs: McpServerConfig[], current: () => McpUpstreams | null): McpUpstreams | null {
    if (configs.length === 0) return null;
    const upstreams: McpUpstreams = new McpUpstreams(configs, {
      ...this.upstreamOptions,
      log: (line) => this.log(`MCP server ${line}`),
      // a set replaced by a reload no longer changes what is served
      onChange: () => {
        if (current() === upstreams) this.rebuild();
      },
    });
    return upstreams;
  }

  /** The one assignment that changes what is served. */
  private rebuild(): void {
    if (!this.runtime) return;
    const configured = composeTools(this.builtIn, this.config, this.envMcpServers);
    const taken = new Set(configured.map((t) => t.name));
    const proxied = [...(this.envUpstreams?.tools() ?? []), ...(this.fileUpstreams?.tools() ?? [])].filter((tool) => {
      if (!taken.has(tool.name)) return true;
      if (!this.shadowed.has(tool.name)) this.log(`MCP server ${tool.mcpOrigin.server}: ${tool.name} is also a configured tool; the configured one is served`);
      this.shadowed.add(tool.name);
      return false;
    });
    this.runtime.registry = new ToolRegistry([...configured, ...proxied]);
  }
}
