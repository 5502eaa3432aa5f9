import { z } from "zod";

/** A server's name prefixes its tools (`<server>.<tool>`), so it follows the tool-name rules. */
const serverName = z.string().regex(/^[a-z][a-z0-9_]{0,39}$/, "lower-case letters, digits and _, starting with a letter (it prefixes the tools' names)");

const common = {
  name: serverName,
  /** how long a call may take before its outcome is unknown (default 30 s) */
  timeoutMs: z.number().int().positive().max(600_000).optional(),
};

export const httpMcpServer = z.strictObject({
  ...common,
  url: z.url({ protocol: /^https?$/ }),
  headers: z.record(z.string(), z.string()).optional(),
});

export const stdioMcpServer = z.strictObject({
  ...common,
  command: z.string().min(1),
  args: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  cwd: z.string().optional(),
});

/**
 * A guarded MCP server, as IDEMGATE_MCP_SERVERS and a configuration file's `mcpServers:` declare it:
 * Streamable HTTP (`url`, `headers`) or stdio (`command`, `args`, `env`, `cwd`).
 */
export const mcpServerSchema = z.union([httpMcpServer, stdioMcpServer]);

/** A list of servers, each name once. */
export const mcpServersSchema = z.array(mcpServerSchema).superRefine((servers, ctx) => {
  const seen = new Set<string>();
  servers.forEach((s, i) => {
    if (seen.has(s.name)) ctx.addIssue({ code: "custom", path: [i, "name"], message: `${s.name} is configured twice` });
    seen.add(s.name);
  });
});

export type McpServerConfig = z.output<typeof httpMcpServer> | z.output<typeof stdioMcpServer>;
export type StdioMcpServerConfig = z.output<typeof stdioMcpServer>;
