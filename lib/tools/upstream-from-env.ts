import { z } from "zod";
import { JSON_POINTER } from "@/lib/idempotency/kept-arguments";
import { formatPath, type DeclaredToolDefinition } from "./config-file";
import { defineTool } from "./define-tool";
import { resolveUpstream, upstreamShapeFields } from "./upstream-shape";

const UpstreamToolSpec = z.strictObject({
  name: z.string(),
  kind: z.enum(["read", "write"]).default("write"),
  description: z.string().default("Forwarded to an HTTP service"),
  url: z.string().url(),
  timeoutMs: z.number().int().positive().default(10_000),
  ttlMs: z.number().int().positive().optional(),
  leaseMs: z.number().int().positive().optional(),
  stuckPolicy: z.enum(["block", "takeover"]).optional(),
  fallbackDedupe: z.boolean().optional(),
  dedupes: z.boolean().optional(),
  statusUrl: z.string().url().optional(),
  headers: z.record(z.string(), z.string()).optional(),
  arguments: z.enum(["redacted", "none", "full"]).optional(),
  redact: z.array(z.string().regex(JSON_POINTER, "must be a JSON pointer such as /card/number")).optional(),
  // method, path templates, query, body, the key's header and length, outcome overrides, probe, preset
  ...upstreamShapeFields,
});

/**
 * Upstream tools declared without code: IDEMGATE_UPSTREAM_TOOLS holds a JSON array of
 * `{ name, url, kind?, timeoutMs?, ttlMs?, leaseMs?, stuckPolicy?, fallbackDedupe?, dedupes?, statusUrl?, headers?, maxResponseBytes?, arguments?, redact? }`
 * and the request-shape fields of a configuration file's `upstream:` (lib/tools/upstream-shape.ts:
 * preset, method, query, body, repeatInBody, keyHeader, keyMaxLength, outcomes, probe, keyRetentionMs).
 * Without an inputSchema, a path argument a call lacks is refused when the call arrives (400).
 * Their arguments are any JSON object (the service validates them); everything else is as for a
 * tool declared in config.ts.
 */
export function upstreamToolsFromEnv(raw: string | undefined = process.env.IDEMGATE_UPSTREAM_TOOLS): DeclaredToolDefinition[] {
  if (!raw || raw.trim() === "") return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new Error(`IDEMGATE_UPSTREAM_TOOLS is not valid JSON: ${(err as Error).message}`);
  }
  const specs = z.array(UpstreamToolSpec).safeParse(parsed);
  if (!specs.success) {
    throw new Error(`IDEMGATE_UPSTREAM_TOOLS: ${specs.error.issues.map((i) => `${formatPath(i.path as (string | number)[])}: ${i.message}`).join("; ")}`);
  }
  const problems: string[] = [];
  const resolved = specs.data.map((spec, i) => {
    const { name, kind, description, ttlMs, leaseMs, stuckPolicy, fallbackDedupe, dedupes, arguments: keep, redact, ...shape } = spec;
    const r = resolveUpstream(shape, { dedupes, kind });
    if (Array.isArray(r)) problems.push(...r.map((p) => `${formatPath([i, ...p.at])}: ${p.message}`));
    return { name, kind, description, ttlMs, leaseMs, stuckPolicy, fallbackDedupe, keep, redact, resolved: r };
  });
  if (problems.length > 0) throw new Error(`IDEMGATE_UPSTREAM_TOOLS: ${problems.join("; ")}`);
  return resolved.map((spec, i) => {
    const r = spec.resolved as Exclude<typeof spec.resolved, unknown[]>;
    return Object.assign(defineTool({
      name: spec.name,
      kind: spec.kind,
      description: spec.description,
      schema: z.looseObject({}),
      upstream: r.upstream,
      ttlMs: spec.ttlMs,
      leaseMs: spec.leaseMs,
      stuckPolicy: spec.stuckPolicy,
      fallbackDedupe: spec.fallbackDedupe,
      dedupes: r.dedupes,
      arguments: spec.keep,
      redact: spec.redact,
    }), { declaredIn: { source: "IDEMGATE_UPSTREAM_TOOLS", path: `[${i}]`, fromEnvironment: {} } });
  });
}
