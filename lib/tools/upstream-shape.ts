import { z } from "zod";
import type { OutcomeOverride, UpstreamConfig } from "./define-tool";
import { PRESET_NAMES, PRESETS } from "./upstream-presets";
import { bodyKindOf, MIN_KEY_LENGTH, pathTemplateNames, urlTemplateProblem } from "./upstream-request";

/**
 * The request-shape fields of an upstream tool's declaration, the same in a configuration file's
 * `upstream:` and in IDEMGATE_UPSTREAM_TOOLS (DESIGN.md § Upstream contract).
 */
const argumentName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an argument's name (letters, digits and _)");
const outcome = z.enum(["done", "not_run", "unknown"], { message: "must be done, not_run or unknown" });
const scalar = z.union([z.string(), z.number(), z.boolean()]);

export const upstreamShapeFields = {
  preset: z.enum(PRESET_NAMES, { message: `must be one of ${PRESET_NAMES.join(", ")}` }).optional(),
  method: z.enum(["POST", "PUT", "PATCH", "DELETE"], { message: "must be POST, PUT, PATCH or DELETE" }).optional(),
  query: z.array(argumentName).optional(),
  body: z.enum(["json", "form", "none"], { message: "must be json, form or none" }).optional(),
  repeatInBody: z.array(argumentName).optional(),
  keyHeader: z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, "must be a header name").optional(),
  keyMaxLength: z.number().int("must be a whole number").min(MIN_KEY_LENGTH, `must be at least ${MIN_KEY_LENGTH}`).optional(),
  outcomes: z.record(z.string(), z.union([outcome, z.strictObject({ outcome, when: z.record(z.string(), scalar).optional() })])).optional(),
  probe: z.enum(["resend", "none"], { message: "must be resend (or none, to turn a preset's off)" }).optional(),
  keyRetentionMs: z.number().int("must be a whole number of milliseconds").positive("must be a positive number of milliseconds").optional(),
  maxResponseBytes: z.number().int().positive().optional(),
};

const shapeSchema = z.object(upstreamShapeFields);
export type UpstreamShape = z.output<typeof shapeSchema> & { url: string; timeoutMs: number; headers?: Record<string, string>; statusUrl?: string };

/** One problem of a declaration: the segments under the upstream's own path, and what is wrong. */
export interface ShapeProblem {
  at: (string | number)[];
  message: string;
}

/** Header names the call sets itself. */
const RESERVED_HEADERS = new Set(["content-type", "accept", "idemgate-scope", "idemgate-key", "idemgate-session", "idemgate-execution-id"]);

/**
 * The upstream a declaration asks for, its preset filled in under its own fields, or every problem
 * with the path of its field. `dedupes` is the tool's own field (a preset turns it on unless the
 * declaration says otherwise); `inputSchema`, when given, must require every path argument.
 */
export function resolveUpstream(
  shape: UpstreamShape,
  options: { dedupes: boolean | undefined; kind: "read" | "write"; inputSchema?: Record<string, unknown> },
): { upstream: UpstreamConfig; dedupes: boolean | undefined } | ShapeProblem[] {
  const preset = shape.preset ? PRESETS[shape.preset] : undefined;
  const dedupes = options.dedupes ?? (preset && options.kind === "write" ? preset.dedupes : undefined);
  const outcomes: Record<string, OutcomeOverride> = { ...(preset?.outcomes ?? {}), ...(shape.outcomes ?? {}) };
  const probe = shape.probe ?? (dedupes ? preset?.probe : undefined);
  const upstream: UpstreamConfig = {
    url: shape.url,
    timeoutMs: shape.timeoutMs,
    ...(shape.headers ? { headers: shape.headers } : {}),
    ...(shape.statusUrl ? { statusUrl: shape.statusUrl } : {}),
    ...(shape.maxResponseBytes ? { maxResponseBytes: shape.maxResponseBytes } : {}),
    ...(shape.preset ? { preset: shape.preset } : {}),
    ...(shape.method ? { method: shape.method } : {}),
    ...(shape.query ? { query: shape.query } : {}),
    ...((shape.body ?? preset?.body) ? { body: shape.body ?? preset!.body } : {}),
    ...(shape.repeatInBody ? { repeatInBody: shape.repeatInBody } : {}),
    ...((shape.keyHeader ?? preset?.keyHeader) ? { keyHeader: shape.keyHeader ?? preset!.keyHeader } : {}),
    ...((shape.keyMaxLength ?? preset?.keyMaxLength) ? { keyMaxLength: shape.keyMaxLength ?? preset!.keyMaxLength } : {}),
    ...(Object.keys(outcomes).length > 0 ? { outcomes } : {}),
    ...(probe === "resend" ? { probe } : {}),
    ...((shape.keyRetentionMs ?? preset?.keyRetentionMs) ? { keyRetentionMs: shape.keyRetentionMs ?? preset!.keyRetentionMs } : {}),
  };
  const problems = checkShape(upstream, shape, { ...options, dedupes, declaredDedupes: options.dedupes });
  return problems.length > 0 ? problems : { upstream, dedupes };
}

function checkShape(
  u: UpstreamConfig,
  shape: UpstreamShape,
  options: { dedupes: boolean | undefined; declaredDedupes: boolean | undefined; kind: "read" | "write"; inputSchema?: Record<string, unknown> },
): ShapeProblem[] {
  const problems: ShapeProblem[] = [];
  const urlProblem = urlTemplateProblem(u.url);
  if (urlProblem) problems.push({ at: ["url"], message: urlProblem });
  const templated = pathTemplateNames(u.url);
  if (options.inputSchema !== undefined) {
    const required = Array.isArray(options.inputSchema.required) ? (options.inputSchema.required as unknown[]) : [];
    for (const name of templated) {
      if (!required.includes(name)) problems.push({ at: ["url"], message: `names {${name}}, so inputSchema must list ${name} in required (a call without it could not be sent)` });
    }
  }
  const query = u.query ?? [];
  let fixedQuery: URLSearchParams | null = null;
  try {
    fixedQuery = new URL(u.url.replace(/\{[^}]*\}/g, "x")).searchParams;
  } catch {
    // the URL's own problem is reported where it is checked
  }
  query.forEach((name, i) => {
    if (templated.includes(name)) problems.push({ at: ["query", i], message: `${name} is already in the URL's path` });
    else if (fixedQuery?.has(name)) problems.push({ at: ["query", i], message: `${name} is already in the URL's query: the service would receive it twice` });
  });
  // body: none sends only path and query arguments: an argument the schema names otherwise would be dropped
  if (bodyKindOf(u) === "none" && options.inputSchema !== undefined) {
    const properties = options.inputSchema.properties;
    const names = properties && typeof properties === "object" ? Object.keys(properties) : [];
    const dropped = names.filter((name) => !templated.includes(name) && !query.includes(name));
    if (dropped.length > 0) problems.push({ at: ["body"], message: `is none, so ${dropped.join(", ")} (in inputSchema, neither a path nor a query argument) would never be sent; list them in query or send a body` });
  }
  (u.repeatInBody ?? []).forEach((name, i) => {
    if (!templated.includes(name) && !query.includes(name)) problems.push({ at: ["repeatInBody", i], message: `${name} is neither a path nor a query argument (the others are sent in the body anyway)` });
  });
  if (u.repeatInBody?.length && u.body === "none") problems.push({ at: ["repeatInBody"], message: "is for tools that send a body (this one has body: none)" });
  if (u.keyHeader && RESERVED_HEADERS.has(u.keyHeader.toLowerCase())) problems.push({ at: ["keyHeader"], message: `${u.keyHeader} is a header Idemgate sets itself` });
  for (const [code, override] of Object.entries(shape.outcomes ?? {})) {
    if (!/^[45]\d\d$/.test(code)) {
      problems.push({ at: ["outcomes", code], message: "must be a 4xx or 5xx status: a 2xx is done, a 3xx unknown, and no answer at all (a timeout, a reset) is always unknown" });
      continue;
    }
    const cls = typeof override === "string" ? override : override.outcome;
    if (cls === "done" && code.startsWith("5")) problems.push({ at: ["outcomes", code], message: "a 5xx cannot be done: a stored result is a 2xx or a final 4xx" });
    const when = typeof override === "string" ? undefined : override.when;
    if (cls === "not_run" && (code === "502" || code === "504")) {
      problems.push({ at: ["outcomes", code], message: `a ${code} cannot be not_run: it comes from a proxy or gateway in front of the service, which cannot know whether the service applied the call` });
    } else if (cls === "not_run" && code.startsWith("5") && (when === undefined || Object.keys(when).length === 0)) {
      problems.push({ at: ["outcomes", code], message: `a ${code} can be not_run only with a when: clause matching the service's own answer body (a proxy's ${code} says nothing about the call)` });
    }
  }
  if (shape.preset !== undefined && (u.method ?? "POST") !== "POST") {
    problems.push({ at: ["method"], message: `${u.method} is not what the ${shape.preset} preset is for: the provider deduplicates POST requests only; declare the fields yourself without a preset` });
  }
  if (shape.preset === "resend" && options.declaredDedupes !== true && !resendDedupes(u.url)) {
    problems.push({ at: ["url"], message: "with the resend preset must be POST /emails or /emails/batch, the endpoints Resend deduplicates on the key; for another, say dedupes: true if its reference says it does" });
  }
  if (u.probe === "resend") {
    const at = shape.probe === "resend" ? ["probe"] : ["preset"];
    if (options.kind !== "write") problems.push({ at, message: "probe: resend is for write tools" });
    if (!options.dedupes) problems.push({ at, message: "probe: resend needs dedupes: true (a resend is safe only at a service that deduplicates on the key); set probe: none to turn it off" });
    if (u.statusUrl !== undefined) problems.push({ at, message: "probe: resend and statusUrl are two probes; give one" });
    if (u.keyRetentionMs === undefined) problems.push({ at: ["keyRetentionMs"], message: "is required with probe: resend: how long the service keeps a key (nothing is resent once it may have forgotten it)" });
  } else if (shape.keyRetentionMs !== undefined && shape.probe !== "none") {
    problems.push({ at: ["keyRetentionMs"], message: "is for probe: resend" });
  }
  return problems;
}

/** Resend honours the key on POST /emails and /emails/batch only. */
function resendDedupes(url: string): boolean {
  try {
    return /\/emails(\/batch)?\/?$/.test(new URL(url.replace(/\{[^}]*\}/g, "x")).pathname);
  } catch {
    return false;
  }
}
