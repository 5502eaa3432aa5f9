import { readFileSync } from "node:fs";
import path from "node:path";
import { parseDocument } from "yaml";
import { z } from "zod";
import { JSON_POINTER } from "@/lib/idempotency/kept-arguments";
import { DEFAULT_POLICY, leaseMarginMs } from "@/lib/idempotency/tool";
import { defineTool, TOOL_NAME_PATTERN, ToolDefinitionError, type ToolDefinition } from "./define-tool";
import { argsSchemaFromJsonSchema, compileInputSchema, type SchemaIssue } from "./json-schema-args";
import { fieldIssues, mcpServerSchema, type McpServerConfig } from "./mcp-server-schema";
import { resolveUpstream, upstreamShapeFields } from "./upstream-shape";
import { webhookEndpointSchema, type WebhookEndpoint } from "@/lib/notifications/webhook-config";

/** One problem of a configuration file: the path of the bad field (`tools[1].upstream.timeoutMs`) and what is wrong. */
export interface ConfigProblem {
  path: string;
  message: string;
}

/** A configuration that cannot be served; nothing of it is. */
export class ConfigFileError extends Error {
  constructor(
    readonly file: string,
    readonly problems: ConfigProblem[],
  ) {
    super(`${file}: ${problems.map((p) => (p.path ? `${p.path}: ${p.message}` : p.message)).join("; ")}`);
    this.name = "ConfigFileError";
  }
}

export type { ArgumentRetention } from "@/lib/idempotency/kept-arguments";

/** Where a tool was declared, and what the console must mask of it. */
export interface DeclaredIn {
  /** the file, or the environment variable */
  source: string;
  /** the declaration's place in it: `tools[1]` */
  path: string;
  /**
   * fields (dotted paths inside the declaration, `upstream.url`) whose value came in part from the
   * environment, as written (`https://…/${REGION}/invoices`): the console shows these with the
   * substituted parts masked, never the values
   */
  fromEnvironment: Record<string, string>;
}

/** A tool declared in a configuration file (or an environment variable): its definition and where it came from. */
export type DeclaredToolDefinition = ToolDefinition & { declaredIn: DeclaredIn };

export function declaredInOf(tool: ToolDefinition): DeclaredIn | null {
  const d = (tool as Partial<DeclaredToolDefinition>).declaredIn;
  return d && typeof d.source === "string" ? d : null;
}

export interface ToolConfig {
  /** the file as given (relative to the working directory, or absolute) */
  file: string;
  tools: DeclaredToolDefinition[];
  mcpServers: McpServerConfig[];
  /** dotted paths of mcpServers' fields that came from the environment (`mcpServers[0].headers.authorization`) */
  mcpFromEnvironment: Set<string>;
  /** where events are sent (lib/notifications) */
  webhooks: WebhookEndpoint[];
}

const ms = z.number().int("must be a whole number of milliseconds").positive("must be a positive number of milliseconds");
const httpUrl = z.url({ protocol: /^https?$/, message: "must be an http or https URL" });

const upstreamSchema = z.strictObject({
  url: httpUrl,
  /** how long a call may take before its outcome is unknown (default 10 s); below a write tool's lease */
  timeoutMs: ms.default(10_000),
  headers: z.record(z.string(), z.string()).optional(),
  statusUrl: httpUrl.optional(),
  // method, path templates, query, body, the key's header and length, outcome overrides, probe, preset
  ...upstreamShapeFields,
});

const toolSchema = z.strictObject({
  name: z.string().regex(TOOL_NAME_PATTERN, "must be lower-case dotted segments of letters, digits and _ (e.g. billing.create_invoice)"),
  kind: z.enum(["read", "write"]).default("write"),
  description: z.string().trim().min(1, "must say what the tool does (agents read it)"),
  runs: z.literal("client").optional(),
  upstream: upstreamSchema.optional(),
  inputSchema: z.record(z.string(), z.unknown()).optional(),
  ttlMs: ms.optional(),
  leaseMs: ms.optional(),
  stuckPolicy: z.enum(["block", "takeover"]).optional(),
  fallbackDedupe: z.union([z.boolean(), z.strictObject({ ttlMs: ms })]).optional(),
  dedupes: z.boolean().optional(),
  arguments: z.enum(["redacted", "none", "full"]).optional(),
  redact: z.array(z.string().regex(JSON_POINTER, "must be a JSON pointer such as /card/number")).optional(),
  /** new first executions are refused (503 tool_paused) while the file says so */
  paused: z.boolean().optional(),
});

const fileSchema = z.strictObject({
  tools: z.array(toolSchema).default([]),
  mcpServers: z.array(mcpServerSchema).default([]),
  webhooks: z.array(webhookEndpointSchema).default([]),
});

type ToolEntry = z.output<typeof toolSchema>;

/** `["tools", 1, "upstream", "timeoutMs"]` → `tools[1].upstream.timeoutMs` */
export function formatPath(segments: readonly PropertyKey[]): string {
  let out = "";
  for (const s of segments) {
    if (typeof s === "number") out += `[${s}]`;
    else if (/^[A-Za-z_$][\w$-]*$/.test(String(s))) out += out === "" ? String(s) : `.${String(s)}`;
    else out += `[${JSON.stringify(String(s))}]`;
  }
  return out;
}

const VARIABLE = /\$\$\{|\$\{([^}]*)\}/g;
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Replaces `${NAME}` in every string value (not in `inputSchema` or `description`, which hold no
 * secrets and may hold the characters) with the environment's value; `$${` is a literal `${`. An unset
 * or empty variable is a problem named with the field's path. Returns the substituted fields' templates.
 */
function substitute(
  value: unknown,
  env: Record<string, string | undefined>,
  problems: ConfigProblem[],
  fromEnvironment: Map<string, string>,
  segments: (string | number)[] = [],
): unknown {
  if (typeof value === "string") {
    if (!value.includes("${")) return value;
    let replaced = false;
    const out = value.replace(VARIABLE, (match, name: string | undefined) => {
      if (match === "$${") return "${";
      if (!VARIABLE_NAME.test(name ?? "")) {
        problems.push({ path: formatPath(segments), message: `${match} is not a variable reference (names are letters, digits and _); write $\${ for a literal \${` });
        return match;
      }
      const v = env[name!];
      if (v === undefined || v === "") {
        problems.push({ path: formatPath(segments), message: `the environment variable ${name} is not set${v === "" ? " (it is empty)" : ""}` });
        return match;
      }
      replaced = true;
      return v;
    });
    if (replaced) fromEnvironment.set(formatPath(segments), value);
    return out;
  }
  if (Array.isArray(value)) return value.map((v, i) => substitute(v, env, problems, fromEnvironment, [...segments, i]));
  if (typeof value === "object" && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      // a tool's schema and description are documentation, not settings
      const verbatim = segments.length === 2 && segments[0] === "tools" && (k === "inputSchema" || k === "description");
      out[k] = verbatim ? v : substitute(v, env, problems, fromEnvironment, [...segments, k]);
    }
    return out;
  }
  return value;
}

/** The file's text as data: JSON for `.json`, YAML otherwise (which also reads JSON). */
function parseText(text: string, file: string): { ok: true; data: unknown } | { ok: false; problems: ConfigProblem[] } {
  if (path.extname(file).toLowerCase() === ".json") {
    try {
      return { ok: true, data: JSON.parse(text) };
    } catch (err) {
      return { ok: false, problems: [{ path: "", message: `is not valid JSON: ${(err as Error).message}` }] };
    }
  }
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    return {
      ok: false,
      problems: doc.errors.map((e) => {
        const at = e.linePos?.[0];
        return { path: at ? `line ${at.line}, column ${at.col}` : "", message: `is not valid YAML: ${e.message.split("\n")[0].replace(/ at line \d+, column \d+:?$/, "")}` };
      }),
    };
  }
  return { ok: true, data: doc.toJS() ?? {} };
}

function issuePathsUnder(base: (string | number)[], issues: SchemaIssue[]): ConfigProblem[] {
  return issues.map((i) => ({ path: formatPath([...base, ...i.path]), message: i.message }));
}

/** The checks across one tool's fields that defineTool would otherwise make, named by the file's paths. */
function checkTool(t: ToolEntry, at: (string | number)[]): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const p = (...rest: (string | number)[]) => formatPath([...at, ...rest]);
  if ((t.runs === "client") === (t.upstream !== undefined)) {
    problems.push({ path: p(), message: "give either `upstream` (an HTTP service Idemgate forwards calls to) or `runs: client` (a function in the caller's process, guarded over the reservation API), not both or neither" });
  }
  if (t.runs === "client" && t.kind === "read") problems.push({ path: p("kind"), message: "runs: client is for write tools (a read needs no guard)" });
  if (t.dedupes !== undefined && t.upstream === undefined) problems.push({ path: p("dedupes"), message: "is for upstream tools (the service honours the forwarded key)" });
  if (t.dedupes && t.kind === "read") problems.push({ path: p("dedupes"), message: "is for write tools" });
  if (t.fallbackDedupe && t.kind === "read") problems.push({ path: p("fallbackDedupe"), message: "is for write tools (reads are never gated)" });
  if (t.redact !== undefined && t.arguments !== undefined && t.arguments !== "redacted") problems.push({ path: p("redact"), message: `is for arguments: redacted (this tool keeps ${t.arguments})` });
  if (t.upstream && t.kind === "write") {
    const lease = t.leaseMs ?? DEFAULT_POLICY.leaseMs;
    const margin = leaseMarginMs(lease);
    if (t.upstream.timeoutMs >= lease - margin) {
      problems.push({
        path: p("upstream", "timeoutMs"),
        message: `must be below the lease (${lease} ms${t.leaseMs === undefined ? ", the default" : ""}) by more than ${margin} ms: a call still waiting for its service must never look stuck`,
      });
    }
  }
  return problems;
}

function definitionOf(t: ToolEntry, at: (string | number)[], file: string, fromEnvironment: Map<string, string>): DeclaredToolDefinition | ConfigProblem[] {
  const inputSchema = t.inputSchema ?? { type: "object" };
  const compiled = compileInputSchema(inputSchema);
  if (!compiled.ok) return issuePathsUnder([...at, "inputSchema"], compiled.issues);
  const schema = argsSchemaFromJsonSchema(compiled.validate, t.name);
  const prefix = `${formatPath(at)}.`;
  const declaredIn: DeclaredIn = {
    source: file,
    path: formatPath(at),
    fromEnvironment: Object.fromEntries([...fromEnvironment].filter(([k]) => k.startsWith(prefix)).map(([k, v]) => [k.slice(prefix.length), v])),
  };
  const policy = { ttlMs: t.ttlMs, leaseMs: t.leaseMs, stuckPolicy: t.stuckPolicy, fallbackDedupe: t.fallbackDedupe, arguments: t.arguments, redact: t.redact, ...(t.paused ? { paused: true } : {}) };
  const resolved = t.upstream ? resolveUpstream(t.upstream, { dedupes: t.dedupes, kind: t.kind, inputSchema }) : null;
  if (Array.isArray(resolved)) return resolved.map((problem) => ({ path: formatPath([...at, "upstream", ...problem.at]), message: problem.message }));
  try {
    const defined = t.runs === "client"
      ? // runs in the caller's process, guarded over the reservation API
        defineTool({ name: t.name, kind: t.kind, description: t.description, schema, inputSchema, runs: "client", ...policy })
      : defineTool({
      name: t.name,
      kind: t.kind,
      description: t.description,
      schema,
      inputSchema,
      upstream: resolved!.upstream,
      dedupes: resolved!.dedupes,
      ...policy,
    });
    return Object.assign(defined, { declaredIn });
  } catch (err) {
    if (err instanceof ToolDefinitionError) return [{ path: formatPath(at), message: err.message.replace(/^tool "[^"]*": /, "") }];
    throw err;
  }
}

/**
 * Each endpoint's name once, its secret from the environment (a secret written into the file would be
 * read by everyone who reads the file), and the URL as written when parts of it came from there.
 */
function checkWebhooks(entries: z.output<typeof webhookEndpointSchema>[], fromEnvironment: Map<string, string>, problems: ConfigProblem[]): WebhookEndpoint[] {
  const firstAt = new Map<string, number>();
  return entries.map((w, i) => {
    const at = (field: string) => formatPath(["webhooks", i, field]);
    const earlier = firstAt.get(w.name);
    if (earlier !== undefined) problems.push({ path: at("name"), message: `${w.name} is declared twice (also webhooks[${earlier}])` });
    else firstAt.set(w.name, i);
    if (!fromEnvironment.has(at("secret"))) problems.push({ path: at("secret"), message: "must come from the environment (secret: ${NAME}), not be written into the file" });
    const urlTemplate = fromEnvironment.get(at("url"));
    return urlTemplate ? { ...w, urlTemplate } : { ...w };
  });
}

/**
 * A configuration file's text as tools and MCP servers, or every problem it has, each with the path
 * of its field. Pure: `file` only names the file in problems and declarations.
 * @throws ConfigFileError
 */
export function parseToolConfig(text: string, file: string, env: Record<string, string | undefined> = process.env): ToolConfig {
  const parsed = parseText(text, file);
  if (!parsed.ok) throw new ConfigFileError(file, parsed.problems);
  if (typeof parsed.data !== "object" || parsed.data === null || Array.isArray(parsed.data)) {
    throw new ConfigFileError(file, [{ path: "", message: "must be a mapping with `tools:`, `mcpServers:` and/or `webhooks:`" }]);
  }

  const problems: ConfigProblem[] = [];
  const fromEnvironment = new Map<string, string>();
  const data = substitute(parsed.data, env, problems, fromEnvironment);
  if (problems.length > 0) throw new ConfigFileError(file, problems);

  const result = fileSchema.safeParse(data);
  if (!result.success) {
    throw new ConfigFileError(
      file,
      fieldIssues(result.error.issues).flatMap((i) =>
        i.code === "unrecognized_keys"
          ? i.keys.map((k) => ({ path: formatPath([...i.path, k]), message: "is not a field of this declaration" }))
          : [{ path: formatPath(i.path), message: i.message }],
      ),
    );
  }
  const { tools, mcpServers } = result.data;
  const webhooks = checkWebhooks(result.data.webhooks, fromEnvironment, problems);

  const firstAt = new Map<string, number>();
  tools.forEach((t, i) => {
    const earlier = firstAt.get(t.name);
    if (earlier !== undefined) problems.push({ path: formatPath(["tools", i, "name"]), message: `${t.name} is declared twice (also tools[${earlier}])` });
    else firstAt.set(t.name, i);
    problems.push(...checkTool(t, ["tools", i]));
  });
  const serverAt = new Map<string, number>();
  mcpServers.forEach((s, i) => {
    const earlier = serverAt.get(s.name);
    if (earlier !== undefined) problems.push({ path: formatPath(["mcpServers", i, "name"]), message: `${s.name} is declared twice (also mcpServers[${earlier}])` });
    else serverAt.set(s.name, i);
  });
  if (problems.length > 0) throw new ConfigFileError(file, problems);

  const definitions: DeclaredToolDefinition[] = [];
  tools.forEach((t, i) => {
    const defined = definitionOf(t, ["tools", i], file, fromEnvironment);
    if (Array.isArray(defined)) problems.push(...defined);
    else definitions.push(defined);
  });
  if (problems.length > 0) throw new ConfigFileError(file, problems);

  return {
    file,
    tools: definitions,
    mcpServers,
    webhooks,
    mcpFromEnvironment: new Set([...fromEnvironment.keys()].filter((k) => k.startsWith("mcpServers["))),
  };
}

/**
 * Reads and parses the file IDEMGATE_CONFIG names.
 * @throws ConfigFileError (including a file that cannot be read)
 */
export function loadToolConfig(file: string, env: Record<string, string | undefined> = process.env): ToolConfig {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ConfigFileError(file, [{ path: "", message: code === "ENOENT" ? "no such file (IDEMGATE_CONFIG names it)" : `cannot be read: ${(err as Error).message}` }]);
  }
  return parseToolConfig(text, file, env);
}

/** The file IDEMGATE_CONFIG names, or null. */
export function configFilePath(env: Record<string, string | undefined> = process.env): string | null {
  const file = env.IDEMGATE_CONFIG?.trim();
  return file ? file : null;
}

/**
 * The tools a server serves besides those of MCP servers: the built-in ones (lib/tools/config.ts:
 * the demo tools, IDEMGATE_UPSTREAM_TOOLS) and the file's. A name the file declares again, and an MCP
 * server the file names as IDEMGATE_MCP_SERVERS does, is refused with its path.
 * @throws ConfigFileError
 */
export function composeTools(builtIn: readonly ToolDefinition[], config: ToolConfig | null, envMcpServers: readonly McpServerConfig[] = []): ToolDefinition[] {
  if (!config) return [...builtIn];
  const problems: ConfigProblem[] = [];
  const builtInByName = new Map(builtIn.map((t) => [t.name, t]));
  for (const tool of config.tools) {
    const other = builtInByName.get(tool.name);
    if (!other) continue;
    const where = declaredInOf(other);
    problems.push({
      path: `${declaredInOf(tool)!.path}.name`,
      message: `${tool.name} is also declared ${where ? `in ${where.source} (${where.path})` : "as a built-in tool (lib/tools/config.ts, or a demo tool: IDEMGATE_DEMO_TOOLS=0 turns those off)"}`,
    });
  }
  const envServers = new Map(envMcpServers.map((s, i) => [s.name, i]));
  config.mcpServers.forEach((s, i) => {
    const at = envServers.get(s.name);
    if (at !== undefined) problems.push({ path: formatPath(["mcpServers", i, "name"]), message: `${s.name} is also declared in IDEMGATE_MCP_SERVERS ([${at}])` });
  });
  if (problems.length > 0) throw new ConfigFileError(config.file, problems);
  return [...builtIn, ...config.tools];
}
