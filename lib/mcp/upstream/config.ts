import { z } from "zod";

/** A server's name prefixes its tools (`<server>.<tool>`), so it follows the tool-name rules. */
const serverName = z.string().regex(/^[a-z][a-z0-9_]{0,39}$/, "lower-case letters, digits and _, starting with a letter (it prefixes the tools' names)");

const common = {
  name: serverName,
  /** how long a call may take before its outcome is unknown (default 30 s) */
  timeoutMs: z.number().int().positive().max(600_000).optional(),
};

const httpServer = z.strictObject({
  ...common,
  url: z.url({ protocol: /^https?$/ }),
  headers: z.record(z.string(), z.string()).optional(),
});

const stdioServer = z.strictObject({
  ...common,
  command: z.string().min(1),
  args: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  cwd: z.string().optional(),
});

const serversSchema = z.array(z.union([httpServer, stdioServer])).superRefine((servers, ctx) => {
  const seen = new Set<string>();
  servers.forEach((s, i) => {
    if (seen.has(s.name)) ctx.addIssue({ code: "custom", path: [i, "name"], message: `${s.name} is configured twice` });
    seen.add(s.name);
  });
});

export type McpServerConfig = z.output<typeof httpServer> | z.output<typeof stdioServer>;

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
    const problems = result.error.issues.map((i) => `${i.path.join(".") || "(list)"}: ${i.message}`).join("; ");
    throw new Error(`IDEMGATE_MCP_SERVERS is invalid: ${problems}`);
  }
  return result.data;
}

export function isStdio(config: McpServerConfig): config is z.output<typeof stdioServer> {
  return "command" in config;
}
