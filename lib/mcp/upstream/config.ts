import { fieldIssues, mcpServersSchema as serversSchema, type McpServerConfig, type StdioMcpServerConfig } from "@/lib/tools/mcp-server-schema";

export type { McpServerConfig };

export const DEFAULT_MCP_TIMEOUT_MS = 30_000;

/**
 * IDEMGATE_MCP_SERVERS: a JSON array of MCP servers whose tools Idemgate serves as `<name>.<tool>`:
 * `{"name":"github","url":"https://…/mcp","headers":{"Authorization":"Bearer …"}}` (Streamable HTTP) or
 * `{"name":"files","command":"npx","args":["-y","some-mcp-server"],"env":{…}}` (stdio).
 * @throws Error naming each problem
 */
export function mcpServersFromEnv(env: NodeJS.ProcessEnv = process.env): McpServerConfig[] {
  const raw = env.IDEMGATE_MCP_SERVERS?.trim();
  if (!raw) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new Error(`IDEMGATE_MCP_SERVERS is not JSON: ${(err as Error).message}`);
  }
  const result = serversSchema.safeParse(parsed);
  if (!result.success) {
    const problems = fieldIssues(result.error.issues).map((i) => `${i.path.join(".") || "(list)"}: ${i.message}`).join("; ");
    throw new Error(`IDEMGATE_MCP_SERVERS is invalid: ${problems}`);
  }
  return result.data;
}

export function isStdio(config: McpServerConfig): config is StdioMcpServerConfig {
  return "command" in config;
}
