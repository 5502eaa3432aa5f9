import type { ToolContext } from "@/lib/idempotency/tool";
import type { UpstreamConfig, UpstreamMethod } from "./define-tool";
import { pathTemplateNames, TEMPLATE } from "./url-template";

export { pathTemplateNames, urlTemplateProblem } from "./url-template";

/** The header that carries the derived key unless a tool names its service's own (`keyHeader`). */
export const DEFAULT_KEY_HEADER = "Idempotency-Key";

/** The shortest `keyMaxLength` accepted: 32 characters (192 bits) of the digest. */
export const MIN_KEY_LENGTH = 32;

/** One problem with the arguments a request is built from, named by the argument. */
export interface RequestArgumentIssue {
  path: string;
  message: string;
}

function isScalar(value: unknown): value is string | number | boolean {
  return typeof value === "string" || typeof value === "number" || typeof value === "boolean";
}

/**
 * The arguments a request cannot be built from: a path argument missing or not a scalar, a query
 * argument that is not a scalar. Checked before the key is reserved (ToolRegistry.parseArgs), so
 * such a call is a 400 that holds no key and sends nothing.
 */
export function requestArgumentIssues(config: UpstreamConfig, args: Record<string, unknown>): RequestArgumentIssue[] {
  const issues: RequestArgumentIssue[] = [];
  for (const name of pathTemplateNames(config.url)) {
    const value = args[name];
    if (value === undefined || value === null) issues.push({ path: name, message: `is required: the URL's path names it ({${name}})` });
    else if (!isScalar(value)) issues.push({ path: name, message: `must be a string, number or boolean: it is part of the URL's path ({${name}})` });
    else if (value === "") issues.push({ path: name, message: `must not be empty: it is part of the URL's path ({${name}})` });
    else if (value === "." || value === "..") issues.push({ path: name, message: `must not be "${value}": it is part of the URL's path ({${name}}), where it would move the request to another path` });
  }
  // a segment built from several templates (`{a}{b}`, `v{a}`) must not come out as a dot segment either
  if (issues.length === 0) {
    for (const segment of templatedSegments(config.url)) {
      const filled = segment.replace(TEMPLATE, (_m, name: string) => String(args[name]));
      if (filled === "." || filled === "..") {
        const names = pathTemplateNames(segment);
        issues.push({ path: names[0], message: `with ${names.slice(1).join(", ") || "the path around it"} makes the URL's path segment ${segment} "${filled}", which would move the request to another path` });
      }
    }
  }
  for (const name of config.query ?? []) {
    const value = args[name];
    if (value !== undefined && value !== null && !isScalar(value)) issues.push({ path: name, message: "must be a string, number or boolean: it is sent as a query parameter" });
  }
  if (bodyKindOf(config) === "form") issues.push(...formIssues(bodyArguments(config, args)));
  return issues;
}

/** The segments of a URL template's path that hold an {argument}. */
function templatedSegments(url: string): string[] {
  const afterScheme = url.indexOf("//");
  const pathStart = url.indexOf("/", afterScheme === -1 ? 0 : afterScheme + 2);
  if (pathStart === -1) return [];
  const path = url.slice(pathStart).split(/[?#]/)[0];
  return path.split("/").filter((segment) => segment.search(TEMPLATE) !== -1);
}

function pathSegments(pathname: string): string[] {
  return pathname.split("/");
}

/** A call whose request cannot be built; nothing was sent. */
export class RequestArgumentsError extends Error {
  constructor(readonly issues: RequestArgumentIssue[]) {
    super(issues.map((i) => `${i.path}: ${i.message}`).join("; "));
    this.name = "RequestArgumentsError";
  }
}

/**
 * The derived key cut to what the service takes, without its prefix. Deterministic (the same key always fits the same
 * way, so a resend is recognised) and still mostly digest: a prefix of a SHA-256 is as unlikely to
 * collide as its length allows.
 */
export function fitKey(key: string, maxLength: number | undefined): string {
  if (maxLength === undefined || key.length <= maxLength) return key;
  // a shortened key spends every character on the digest: the `idg_` prefix goes first
  return (key.startsWith("idg_") ? key.slice(4) : key).slice(0, maxLength);
}

/** The arguments a call sends in its body: all but its path and query ones, unless repeated there. */
function bodyArguments(config: UpstreamConfig, values: Record<string, unknown>): Record<string, unknown> {
  const placed = new Set([...pathTemplateNames(config.url), ...(config.query ?? [])]);
  const repeated = new Set(config.repeatInBody ?? []);
  return Object.fromEntries(Object.entries(values).filter(([name]) => !placed.has(name) || repeated.has(name)));
}

/**
 * What a form body cannot say: a name with [ or ] (or an empty one) would read as other nesting
 * than the arguments have, and two values under one encoded name would be read as one.
 */
function formIssues(args: Record<string, unknown>): RequestArgumentIssue[] {
  const issues: RequestArgumentIssue[] = [];
  const names = new Set<string>();
  const walk = (path: string, encoded: string, value: unknown) => {
    if (value === undefined) return;
    if (value !== null && typeof value === "object") {
      const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
      if (entries.length === 0) return void (names.has(encoded) ? issues.push({ path, message: `is sent as ${encoded}, a name another argument is sent as too` }) : names.add(encoded));
      for (const [k, v] of entries) {
        if (!Array.isArray(value) && (k === "" || /[[\]]/.test(k))) {
          issues.push({ path: `${path}.${k}`, message: "a name in a form body must not be empty nor hold [ or ]: it would read as other nesting" });
          continue;
        }
        walk(`${path}.${k}`, `${encoded}[${k}]`, v);
      }
      return;
    }
    if (names.has(encoded)) issues.push({ path, message: `is sent as ${encoded}, a name another argument is sent as too` });
    names.add(encoded);
  };
  for (const [name, value] of Object.entries(args)) {
    if (name === "" || /[[\]]/.test(name)) issues.push({ path: name, message: "a name in a form body must not be empty nor hold [ or ]: it would read as other nesting" });
    else walk(name, name, value);
  }
  return issues;
}

/**
 * Arguments as `application/x-www-form-urlencoded`, nested as Stripe reads it: `metadata[order]=42`,
 * `items[0][price]=p_1`, `a[b][c]=x`. null, an empty object and an empty list are sent as an empty
 * value (`metadata=`: how Stripe unsets a field or clears a hash), never dropped. URLSearchParams
 * does the encoding; names that would nest otherwise are refused first (requestArgumentIssues).
 */
export function formBody(args: Record<string, unknown>): URLSearchParams {
  const form = new URLSearchParams();
  const add = (name: string, value: unknown) => {
    if (value === undefined) return;
    if (value === null) form.append(name, "");
    else if (isScalar(value)) form.append(name, String(value));
    else if (Array.isArray(value)) value.length === 0 ? form.append(name, "") : value.forEach((v, i) => add(`${name}[${i}]`, v));
    else if (typeof value === "object") Object.keys(value).length === 0 ? form.append(name, "") : Object.entries(value).forEach(([k, v]) => add(`${name}[${k}]`, v));
  };
  for (const [name, value] of Object.entries(args)) add(name, value);
  return form;
}

export interface UpstreamRequest {
  method: UpstreamMethod;
  url: string;
  headers: Headers;
  body: string | undefined;
}

/** How a tool's other arguments travel: JSON by default, nothing for DELETE. */
export function bodyKindOf(config: UpstreamConfig): "json" | "form" | "none" {
  return config.body ?? ((config.method ?? "POST") === "DELETE" ? "none" : "json");
}

/**
 * The request a call is sent as: the URL with its path templates filled in (each value
 * encodeURIComponent-ed) and its query arguments appended, the remaining arguments as the body,
 * and the headers that name the call, with the derived key under the service's key header.
 * @throws RequestArgumentsError when a path or query argument is missing or not a scalar
 */
export function buildUpstreamRequest(config: UpstreamConfig, args: unknown, ctx: ToolContext, derived: string | null): UpstreamRequest {
  const values = (args && typeof args === "object" && !Array.isArray(args) ? args : {}) as Record<string, unknown>;
  const issues = requestArgumentIssues(config, values);
  if (issues.length > 0) throw new RequestArgumentsError(issues);

  const placed = new Set<string>();
  const url = new URL(
    config.url.replace(TEMPLATE, (_m, name: string) => {
      placed.add(name);
      return encodeURIComponent(String(values[name]));
    }),
  );
  // the URL parser resolves dot segments: the path must keep the template's segments, one for one
  if (pathSegments(url.pathname).length !== pathSegments(new URL(config.url.replace(TEMPLATE, "x")).pathname).length) {
    throw new RequestArgumentsError([{ path: pathTemplateNames(config.url)[0] ?? "url", message: "changes the number of the URL's path segments" }]);
  }
  for (const name of config.query ?? []) {
    const value = values[name];
    placed.add(name);
    if (value !== undefined && value !== null) url.searchParams.append(name, String(value));
  }
  const repeated = new Set(config.repeatInBody ?? []);
  const rest = Object.fromEntries(Object.entries(values).filter(([name]) => !placed.has(name) || repeated.has(name)));

  const kind = bodyKindOf(config);
  const headers = callHeaders(config, ctx, derived);
  let body: string | undefined;
  if (kind === "json") {
    headers.set("content-type", "application/json");
    body = JSON.stringify(rest);
  } else if (kind === "form") {
    headers.set("content-type", "application/x-www-form-urlencoded");
    body = formBody(rest).toString();
  } else {
    headers.delete("content-type");
  }
  return { method: config.method ?? "POST", url: url.toString(), headers, body };
}

/**
 * The headers of a call (and of its status probe): the configured ones first, which may not
 * override what names the call, then the derived key under the service's key header and
 * Idemgate's correlation headers.
 */
export function callHeaders(config: UpstreamConfig, ctx: ToolContext, derived: string | null): Headers {
  const headers = new Headers(config.headers);
  const keyHeader = config.keyHeader ?? DEFAULT_KEY_HEADER;
  headers.set("accept", "application/json");
  headers.set("idemgate-scope", ctx.scope);
  if (ctx.key !== null && derived !== null) {
    headers.set(keyHeader, fitKey(derived, config.keyMaxLength));
    headers.set("idemgate-key", ctx.key);
  } else {
    headers.delete(keyHeader);
    headers.delete("idemgate-key");
  }
  if (ctx.session !== null) headers.set("idemgate-session", ctx.session);
  else headers.delete("idemgate-session");
  if (ctx.executionId !== null) headers.set("idemgate-execution-id", ctx.executionId);
  else headers.delete("idemgate-execution-id");
  return headers;
}
