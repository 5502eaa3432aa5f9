import type { Runtime } from "@/lib/server/runtime";
import type { ToolDefinition } from "@/lib/tools/define-tool";
import { ToolRegistry } from "@/lib/tools/registry";
import { mcpServersFromEnv, type McpServerConfig } from "./config";
import { McpUpstreams, type UpstreamOptions, type UpstreamStatus } from "./upstreams";

const holder = globalThis as unknown as { __idemgateMcpUpstreams?: { statuses(): UpstreamStatus[] } };

/** The guarded MCP servers the status page lists: a server that serves several sets (IDEMGATE_MCP_SERVERS, a configuration file) registers their union. */
export function setMcpStatusSource(source: { statuses(): UpstreamStatus[] }): void {
  holder.__idemgateMcpUpstreams = source;
}

/**
 * Connects to the MCP servers of IDEMGATE_MCP_SERVERS and serves their tools beside the configured
 * ones: the runtime's registry is replaced by one that holds both whenever a server's tool list
 * changes (it connects, reconnects, or says its list changed). A proxied tool whose name is taken by
 * a configured tool is left out. Returns null when no server is configured.
 */
export async function startMcpUpstreams(
  runtime: Runtime,
  configs: McpServerConfig[] = mcpServersFromEnv(),
  options: Omit<UpstreamOptions, "onChange"> = {},
): Promise<McpUpstreams | null> {
  if (configs.length === 0) return null;
  const log = options.log ?? ((line: string) => console.log(`idemgate: MCP server ${line}`));
  const configured: ToolDefinition[] = runtime.registry.list();
  const taken = new Set(configured.map((t) => t.name));
  const upstreams = new McpUpstreams(configs, {
    ...options,
    log,
    onChange(tools) {
      const served = tools.filter((tool) => {
        if (!taken.has(tool.name)) return true;
        log(`${tool.mcpOrigin.server}: ${tool.name} is also a configured tool; the configured one is served`);
        return false;
      });
      runtime.registry = new ToolRegistry([...configured, ...served]);
    },
  });
  holder.__idemgateMcpUpstreams = upstreams;
  await upstreams.start();
  return upstreams;
}

/** How each guarded MCP server is doing (empty when none is configured), for the status page. */
export function mcpUpstreamStatuses(): UpstreamStatus[] {
  return holder.__idemgateMcpUpstreams?.statuses() ?? [];
}
