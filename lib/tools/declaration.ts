import { redactUrl } from "@/lib/db/redact-url";
import { declaredInOf, type ArgumentRetention } from "./config-file";
import type { ToolDefinition, UpstreamBody, UpstreamMethod, UpstreamOutcome } from "./define-tool";
import { bodyKindOf, DEFAULT_KEY_HEADER } from "./upstream-request";
import type { ToolDescription } from "./registry";

/** What the console shows in place of a secret. */
export const MASK = "••••••";

/** A tool's effective declaration as the console shows it: every value in force, no secret. */
export interface EffectiveDeclaration {
  /** where it was declared: `idemgate.config.yaml, tools[1]`, `IDEMGATE_UPSTREAM_TOOLS, [0]`, `lib/tools/config.ts` */
  declaredIn: string;
  runs: "in_process" | "upstream" | "client" | "mcp";
  kind: "read" | "write";
  ttlMs: number;
  leaseMs: number;
  stuckPolicy: "block" | "takeover";
  fallbackTtlMs: number | null;
  dedupes: boolean;
  upstream: {
    method: UpstreamMethod;
    /** without user info or query string; parts from the environment as `${NAME}`, path templates as `{argument}` */
    url: string;
    statusUrl: string | null;
    timeoutMs: number;
    /** every value masked: headers carry credentials */
    headers: { name: string; value: string }[];
    /** the preset the declaration started from, or null */
    preset: string | null;
    /** arguments sent as query parameters */
    query: string[];
    body: UpstreamBody;
    repeatInBody: string[];
    keyHeader: string;
    keyMaxLength: number | null;
    /** status → class, as declared or set by the preset */
    outcomes: { status: string; outcome: UpstreamOutcome; when: Record<string, string | number | boolean> | null }[];
    /** how an unknown outcome is asked about: `status` (statusUrl), `resend`, or none */
    probe: "status" | "resend" | null;
    keyRetentionMs: number | null;
  } | null;
  arguments: ArgumentRetention | null;
  inputSchema: Record<string, unknown>;
}

/**
 * A URL fit to show: the declaration's template when parts came from the environment (those parts
 * shown as `${NAME}`, never their values), then without user info and query string (redactUrl).
 */
function shownUrl(url: string, template: string | undefined): string {
  const names: string[] = [];
  const args: string[] = [];
  // placeholders that survive URL parsing in a host or a path
  const marked = (template ?? url)
    .replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => `idgmask${names.push(name) - 1}x`)
    .replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => `idgarg${args.push(name) - 1}x`);
  const redacted = redactUrl(marked);
  return redacted
    .replace(/idgmask(\d+)x/g, (_m, i: string) => `\${${names[Number(i)]}}`)
    .replace(/idgarg(\d+)x/g, (_m, i: string) => `{${args[Number(i)]}}`);
}

export function effectiveDeclaration(tool: ToolDefinition, described: ToolDescription, mcpServer: string | null): EffectiveDeclaration {
  const declaredIn = declaredInOf(tool);
  const fromEnv = declaredIn?.fromEnvironment ?? {};
  const upstream = tool.upstream
    ? {
        method: tool.upstream.method ?? "POST",
        url: shownUrl(tool.upstream.url, fromEnv["upstream.url"]),
        statusUrl: tool.upstream.statusUrl ? shownUrl(tool.upstream.statusUrl, fromEnv["upstream.statusUrl"]) : null,
        timeoutMs: tool.upstream.timeoutMs,
        headers: Object.keys(tool.upstream.headers ?? {}).map((name) => ({ name, value: MASK })),
        preset: tool.upstream.preset ?? null,
        query: tool.upstream.query ?? [],
        body: bodyKindOf(tool.upstream),
        repeatInBody: tool.upstream.repeatInBody ?? [],
        keyHeader: tool.upstream.keyHeader ?? DEFAULT_KEY_HEADER,
        keyMaxLength: tool.upstream.keyMaxLength ?? null,
        outcomes: Object.entries(tool.upstream.outcomes ?? {}).map(([status, o]) =>
          typeof o === "string" ? { status, outcome: o, when: null } : { status, outcome: o.outcome, when: o.when ?? null },
        ),
        probe: tool.upstream.probe === "resend" ? ("resend" as const) : tool.upstream.statusUrl ? ("status" as const) : null,
        keyRetentionMs: tool.upstream.keyRetentionMs ?? null,
      }
    : null;
  return {
    declaredIn: mcpServer ? `the MCP server ${mcpServer}` : declaredIn ? `${declaredIn.source}, ${declaredIn.path}` : "lib/tools/config.ts",
    runs: mcpServer ? "mcp" : tool.upstream ? "upstream" : tool.runs === "client" ? "client" : "in_process",
    kind: tool.kind,
    ttlMs: tool.ttlMs,
    leaseMs: tool.leaseMs,
    stuckPolicy: tool.stuckPolicy,
    fallbackTtlMs: tool.fallbackTtlMs,
    dedupes: tool.dedupes,
    upstream,
    arguments: tool.argumentRetention ?? null,
    inputSchema: described.argumentsSchema,
  };
}
