import { z } from "zod";
import type { DeclaredToolDefinition } from "./config-file";
import { defineTool } from "./define-tool";

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
  maxResponseBytes: z.number().int().positive().optional(),
});

/**
 * Upstream tools declared without code: IDEMGATE_UPSTREAM_TOOLS holds a JSON array of
 * `{ name, url, kind?, timeoutMs?, ttlMs?, leaseMs?, stuckPolicy?, fallbackDedupe?, dedupes?, statusUrl?, headers?, maxResponseBytes? }`.
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
    throw new Error(`IDEMGATE_UPSTREAM_TOOLS: ${specs.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  }
  return specs.data.map((spec, i) =>
    Object.assign(defineTool({
      name: spec.name,
      kind: spec.kind,
      description: spec.description,
      schema: z.looseObject({}),
      upstream: { url: spec.url, timeoutMs: spec.timeoutMs, headers: spec.headers, statusUrl: spec.statusUrl, maxResponseBytes: spec.maxResponseBytes },
      ttlMs: spec.ttlMs,
      leaseMs: spec.leaseMs,
      stuckPolicy: spec.stuckPolicy,
      fallbackDedupe: spec.fallbackDedupe,
      dedupes: spec.dedupes,
    }), { declaredIn: { source: "IDEMGATE_UPSTREAM_TOOLS", path: `[${i}]`, fromEnvironment: {} } }),
  );
}
