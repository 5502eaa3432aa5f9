import { z } from "zod";

/** A server's name prefixes its tools (`<server>.<tool>`), so it follows the tool-name rules. */
const serverName = z.string().regex(/^[a-z][a-z0-9_]{0,39}$/, "lower-case letters, digits and _, starting with a letter (it prefixes the tools' names)");

/**
 * Which of a guarded server's tools Idemgate gates (DESIGN.md § MCP):
 * - `by-annotations` (the default): `readOnlyHint` → a read, `idempotentHint` → passed through
 *   without a key (audited), anything else → a gated write;
 * - `always`: every tool is a gated write, whatever it says of itself. An `idempotentHint` tool
 *   passed through lets a late retry of an old call undo a newer one (A, then B, then A's retry
 *   sets A again): gating it makes that retry a replay;
 * - `never`: nothing is gated: `readOnlyHint` tools are reads, every other tool is passed through
 *   without a key and still recorded in the audit log (what changed something stays traceable).
 */
export const MCP_GATE_SETTINGS = ["always", "by-annotations", "never"] as const;
export type McpGateSetting = (typeof MCP_GATE_SETTINGS)[number];
const gate = z.enum(MCP_GATE_SETTINGS);

const common = {
  name: serverName,
  /** how long a call may take before its outcome is unknown (default 30 s) */
  timeoutMs: z.number().int().positive().max(600_000).optional(),
  /** how the server's tools are gated (default by-annotations) */
  gate: gate.optional(),
  /**
   * per tool, by its own name at the server: `{ "create_issue": { "gate": "always" } }` overrides
   * the server's `gate` for that tool. A name the server does not offer is logged, not refused:
   * the server's tool list may change while Idemgate runs.
   */
  tools: z.record(z.string().min(1), z.strictObject({ gate })).optional(),
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
 * Streamable HTTP (`url`, `headers`) or stdio (`command`, `args`, `env`, `cwd`), with how its tools
 * are gated (`gate`, and per tool `tools: { <tool>: { gate } }`).
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

/**
 * Issues with the paths of the fields they are about. A server is one of two shapes (a union), and
 * zod reports a declaration that fits neither as one "Invalid input" at the server, with each
 * shape's own issues inside: the shape the declaration comes closest to (fewest issues) speaks
 * for it, so `mcpServers[0].tools.create_issue.gate` is named rather than `mcpServers[0]`.
 */
export function fieldIssues(issues: readonly z.core.$ZodIssue[]): z.core.$ZodIssue[] {
  return issues.flatMap((issue) => {
    if (issue.code !== "invalid_union" || issue.errors.length === 0) return [issue];
    const closest = issue.errors.reduce((a, b) => (b.length < a.length ? b : a));
    return fieldIssues(closest.map((inner) => ({ ...inner, path: [...issue.path, ...inner.path] })));
  });
}
