import type { z } from "zod";
import type { PrismaClient } from "@/generated/prisma/client";
import { argumentRetentionProblem, type ArgumentsPolicy } from "@/lib/idempotency/kept-arguments";
import { DEFAULT_POLICY, leaseMarginMs, type ProbeAnswer, type ProbeContext, type ToolContext, type ToolPolicy, type ToolResult } from "@/lib/idempotency/tool";
import type { SideEffect } from "./effects";
import { toJsonSchema } from "./api-schemas";
import { urlTemplateProblem } from "./url-template";
import { writeOnlyPaths } from "./write-only-paths";

/** Dotted lower-case segments: `payments.charge`, `crm.contacts.upsert`. They appear in URLs unescaped. */
export const TOOL_NAME_PATTERN = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;

// Any zod object, whatever its shape or unknown-key mode.
export type ArgsSchema = z.ZodObject<any, any>;

/** What an in-process tool gets besides its arguments: the call's context and the database. */
export interface InProcessContext extends ToolContext {
  db: PrismaClient;
}

/** What an in-process tool's status probe gets: the call's scope, key and execution, and the database. */
export interface InProcessProbeContext extends ProbeContext {
  db: PrismaClient;
}

/**
 * A service Idemgate forwards calls to (lib/tools/upstream.ts), passing a key derived from the
 * caller's scope and key on (`Idempotency-Key`), so the service can deduplicate too.
 */
export interface UpstreamConfig {
  url: string;
  timeoutMs: number;
  /** sent with every call, e.g. the upstream's own credentials */
  headers?: Record<string, string>;
  /**
   * `GET statusUrl` with the call's headers answers whether the call with that key was applied:
   * `{"outcome":"applied","status":200,"body":…}`, `{"outcome":"not_applied"}` or `{"outcome":"unknown"}`
   */
  statusUrl?: string;
  /**
   * the largest answer body kept (default 1 MiB, DEFAULT_MAX_RESPONSE_BYTES): a larger 2xx or final
   * 4xx answer is done, and stored as a placeholder that says so (lib/tools/upstream.ts)
   */
  maxResponseBytes?: number;
  /** POST by default (lib/tools/upstream-request.ts builds the request) */
  method?: UpstreamMethod;
  /** arguments sent as query parameters (scalars; a missing one is left out) */
  query?: string[];
  /** how the other arguments are sent: JSON (the default, none for DELETE), a form as Stripe reads it, or not at all */
  body?: UpstreamBody;
  /** path and query arguments that are sent in the body too (by default each argument goes one place) */
  repeatInBody?: string[];
  /** the header that carries the derived key (default Idempotency-Key; PayPal: PayPal-Request-Id) */
  keyHeader?: string;
  /** the longest key the service takes: the derived key is shortened to fit, deterministically */
  keyMaxLength?: number;
  /** answers whose class the service's own documentation says differs from the default */
  outcomes?: Record<string, OutcomeOverride>;
  /** `resend`: an unknown outcome is resolved by sending the same request with the same key again */
  probe?: "resend";
  /** how long the service keeps a key (resend probes are sent only within it, minus a margin) */
  keyRetentionMs?: number;
  /** the preset the declaration started from, shown on the console */
  preset?: string;
}

export type UpstreamMethod = "POST" | "PUT" | "PATCH" | "DELETE";
export type UpstreamBody = "json" | "form" | "none";
export type UpstreamOutcome = "done" | "not_run" | "unknown";
/**
 * A status's class, always or only when the answer's JSON body holds these values (dotted paths,
 * `error.type`), as for Adyen's 422 with errorCode 704 (the key is in use by a request in progress).
 */
export type OutcomeOverride = UpstreamOutcome | { outcome: UpstreamOutcome; when?: Record<string, string | number | boolean> };

interface ToolSpec<S extends ArgsSchema> {
  description: string;
  /** validates the arguments before the key is reserved; exported as JSON Schema and OpenAPI */
  schema: S;
  /**
   * the arguments' JSON Schema when the tool was declared in JSON Schema (a configuration file's
   * `inputSchema`): advertised as it is (OpenAPI, the tool list, MCP) instead of one derived from
   * `schema`, which then validates by it (lib/tools/json-schema-args.ts)
   */
  inputSchema?: Record<string, unknown>;
  /** documents the result (JSON Schema, OpenAPI); results are not validated against it */
  resultSchema?: z.ZodType;
  /**
   * the side effects the tool committed at or after `since`, from its own records: the reconciler
   * flags each one without an execution in the audit log (an unrecorded effect)
   */
  listEffects?(db: PrismaClient, since: Date): Promise<SideEffect[]>;
}

// `run` is declared as a method so definitions with specific argument types fit in one list.
interface InProcessSource<S extends ArgsSchema> {
  run(args: z.output<S>, ctx: InProcessContext): Promise<ToolResult>;
  /** whether the call with this scope and key applied its side effect, from the tool's own records */
  probe?(ctx: InProcessProbeContext): Promise<ProbeAnswer>;
  upstream?: undefined;
  runs?: undefined;
}

interface UpstreamSource {
  upstream: UpstreamConfig;
  run?: undefined;
  probe?: undefined;
  runs?: undefined;
}

/**
 * A tool that runs in its caller's own process (an agent's charge_card calling a payment SDK):
 * Idemgate holds its keys and results, the caller reserves, runs and settles it over the
 * reservation API (the client libraries' guard()). It has no run and no upstream.
 */
interface ClientSource {
  runs: "client";
  run?: undefined;
  probe?: undefined;
  upstream?: undefined;
}

type Source<S extends ArgsSchema> = InProcessSource<S> | UpstreamSource | ClientSource;

export type ToolDefinition<S extends ArgsSchema = ArgsSchema> = ToolPolicy & ToolSpec<S> & Source<S>;

/** What `defineTool` takes: the policy fields are optional and default to DEFAULT_POLICY. */
export type ToolInput<S extends ArgsSchema> = ToolSpec<S> &
  Source<S> & {
    name: string;
    kind: "read" | "write";
    ttlMs?: number;
    leaseMs?: number;
    /** how long a call of an in-process tool takes at most (see ToolPolicy.runTimeoutMs); an upstream's is its timeoutMs */
    runTimeoutMs?: number;
    stuckPolicy?: "block" | "takeover";
    /**
     * Keyless calls are deduplicated by their arguments (`fallback:` + fingerprint) for a short
     * window instead of being refused. Every suppression through it is a stale-suppression
     * candidate, so it is opt-in. `true` means the default window (60 s).
     */
    fallbackDedupe?: boolean | { ttlMs: number };
    /**
     * the service honours the forwarded key itself (as Stripe does): a call whose outcome is
     * unknown (or stuck) is sent again with the same key instead of being held
     */
    dedupes?: boolean;
    /**
     * a read recorded in the audit log: a tool that is idempotent by its own word, passed through
     * without a key (an MCP server's `idempotentHint` tools); writes are always recorded
     */
    audited?: boolean;
    /**
     * what each execution keeps of the arguments for operators: `redacted` (the default: secret-looking
     * names and the `redact` pointers replaced, capped at 8 KiB), `full`, or `none` (the fingerprint only)
     */
    arguments?: ArgumentsPolicy;
    /** JSON pointers (`/card/number`) of values to redact besides the secret-looking names (arguments: redacted) */
    redact?: string[];
    /** declared paused: new first executions are refused until a declaration without it (write tools) */
    paused?: boolean;
  };

export class ToolDefinitionError extends Error {
  constructor(tool: string, problem: string) {
    super(`tool ${JSON.stringify(tool)}: ${problem}`);
    this.name = "ToolDefinitionError";
  }
}

function positiveMs(tool: string, field: string, value: number): number {
  if (!Number.isInteger(value) || value <= 0) throw new ToolDefinitionError(tool, `${field} must be a positive whole number of milliseconds`);
  return value;
}

export function defineTool<S extends ArgsSchema>(input: ToolInput<S>): ToolDefinition<S> {
  const { name, fallbackDedupe, dedupes, arguments: keep, redact, ...rest } = input;
  if (!TOOL_NAME_PATTERN.test(name)) {
    throw new ToolDefinitionError(name, "names are lower-case dotted segments of letters, digits and _ (e.g. payments.charge)");
  }
  const hasRun = typeof input.run === "function";
  const hasUpstream = input.upstream !== undefined;
  const runsInClient = input.runs !== undefined;
  if (runsInClient && input.runs !== "client") throw new ToolDefinitionError(name, `runs must be "client" (the tool runs in its caller's process), not ${JSON.stringify((input as { runs?: unknown }).runs)}`);
  if (Number(hasRun) + Number(hasUpstream) + Number(runsInClient) !== 1) {
    throw new ToolDefinitionError(name, 'give exactly one of run (in process), upstream (an HTTP service) or runs: "client" (in the caller\'s process)');
  }
  if (runsInClient && input.kind !== "write") throw new ToolDefinitionError(name, 'runs: "client" is for write tools (a read needs no guard)');
  if (runsInClient && input.runTimeoutMs !== undefined) throw new ToolDefinitionError(name, 'runTimeoutMs is for tools Idemgate runs; a client-run call keeps its lease alive with heartbeats');
  if (input.upstream) {
    try {
      new URL(input.upstream.url);
    } catch {
      throw new ToolDefinitionError(name, `upstream.url is not a URL: ${input.upstream.url}`);
    }
    positiveMs(name, "upstream.timeoutMs", input.upstream.timeoutMs);
    const templateProblem = urlTemplateProblem(input.upstream.url);
    if (templateProblem) throw new ToolDefinitionError(name, `upstream.url ${templateProblem}`);
    if (input.upstream.probe === "resend" && (!input.dedupes || input.upstream.keyRetentionMs === undefined || input.upstream.statusUrl !== undefined)) {
      throw new ToolDefinitionError(name, "upstream.probe resend needs dedupes: true and upstream.keyRetentionMs, and no statusUrl");
    }
    if (input.upstream.statusUrl !== undefined) {
      try {
        new URL(input.upstream.statusUrl);
      } catch {
        throw new ToolDefinitionError(name, `upstream.statusUrl is not a URL: ${input.upstream.statusUrl}`);
      }
    }
  }
  if (input.paused && input.kind === "read") throw new ToolDefinitionError(name, "paused is for write tools (reads are never refused)");
  if (input.dedupes && input.kind === "read") throw new ToolDefinitionError(name, "dedupes is for write tools");
  if (input.audited && input.kind === "write") throw new ToolDefinitionError(name, "audited is for read tools (every write is recorded)");
  const retentionProblem = argumentRetentionProblem({ keep, redact });
  if (retentionProblem) throw new ToolDefinitionError(name, retentionProblem);

  let fallbackTtlMs: number | null = DEFAULT_POLICY.fallbackTtlMs;
  if (fallbackDedupe) {
    // Reads are never gated, so there is nothing to deduplicate.
    if (input.kind === "read") throw new ToolDefinitionError(name, "fallbackDedupe is for write tools");
    fallbackTtlMs = fallbackDedupe === true ? DEFAULT_POLICY.fallbackDefaultTtlMs : positiveMs(name, "fallbackDedupe.ttlMs", fallbackDedupe.ttlMs);
  }

  const leaseMs = positiveMs(name, "leaseMs", input.leaseMs ?? DEFAULT_POLICY.leaseMs);
  if (input.upstream && input.kind === "write" && input.upstream.timeoutMs >= leaseMs) {
    // a call still waiting for its answer must never look stuck: takeover would send a second copy
    throw new ToolDefinitionError(name, `upstream.timeoutMs (${input.upstream.timeoutMs}) must be below the lease (${leaseMs} ms)`);
  }
  const runTimeoutMs = input.upstream?.timeoutMs ?? (input.runTimeoutMs === undefined ? undefined : positiveMs(name, "runTimeoutMs", input.runTimeoutMs));
  // the engine starts a call only while the rest of its lease covers the timeout and its margin
  if (runTimeoutMs !== undefined && input.kind === "write" && runTimeoutMs >= leaseMs - leaseMarginMs(leaseMs)) {
    const field = input.upstream ? "upstream.timeoutMs" : "runTimeoutMs";
    throw new ToolDefinitionError(name, `${field} (${runTimeoutMs}) must be below the lease (${leaseMs} ms) by more than ${leaseMarginMs(leaseMs)} ms`);
  }

  return {
    ...rest,
    name,
    ttlMs: positiveMs(name, "ttlMs", input.ttlMs ?? DEFAULT_POLICY.ttlMs),
    leaseMs,
    ...(runTimeoutMs === undefined ? {} : { runTimeoutMs }),
    stuckPolicy: input.stuckPolicy ?? DEFAULT_POLICY.stuckPolicy,
    fallbackTtlMs,
    dedupes: dedupes ?? DEFAULT_POLICY.dedupes,
    argumentRetention: { keep: keep ?? "redacted", redact: [...(redact ?? [])], ...writeOnlyOf(input) },
  } as ToolDefinition<S>;
}

/** The paths its arguments' schema marks writeOnly (never kept for operators), when there are any. */
function writeOnlyOf(input: { schema: ArgsSchema; inputSchema?: Record<string, unknown> }): { writeOnly?: string[] } {
  const paths = writeOnlyPaths(input.inputSchema ?? toJsonSchema(input.schema));
  return paths.length > 0 ? { writeOnly: paths } : {};
}

/** The tool list of lib/tools/config.ts; names must be unique. */
export function defineTools(tools: readonly ToolDefinition[]): readonly ToolDefinition[] {
  const seen = new Set<string>();
  for (const tool of tools) {
    if (seen.has(tool.name)) throw new ToolDefinitionError(tool.name, "defined twice");
    seen.add(tool.name);
  }
  return Object.freeze([...tools]);
}
