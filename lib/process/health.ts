import packageJson from "@/package.json";
import type { AuditMode } from "@/lib/audit/audit-writer";
import type { OperatorIdentity } from "@/lib/auth/roles";
import { redactUrl } from "@/lib/db/redact-url";
import type { Runtime } from "@/lib/server/runtime";
import { toolConfigStatus, type ToolConfigStatus } from "./tool-config-status";

export interface ComponentHealth<Kind extends string> {
  kind: Kind;
  /** a URL without user info or query string (lib/db/redact-url.ts), or "embedded" */
  location: string;
  ok: boolean;
  latencyMs: number;
  error?: string;
}

export interface Health {
  status: "ok" | "degraded";
  keyStore: ComponentHealth<Runtime["store"]["kind"]>;
  database: ComponentHealth<"postgres" | "pglite">;
  auditMode: AuditMode;
  version: string;
  /**
   * the configuration file the tools come from (IDEMGATE_CONFIG), and why its last reload was
   * refused; absent without one. A refused reload keeps the tools before it, so it is not a
   * degraded status.
   */
  toolConfig?: ToolConfigStatus;
}

export const HEALTH_TIMEOUT_MS = 2_000;

export class HealthTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`);
    this.name = "HealthTimeoutError";
  }
}

/**
 * Runs one probe, bounded by a timeout so a dead server (a Redis that accepts connections and never
 * answers, a PostgreSQL behind a dropped route) cannot hang the status page or the health check.
 */
async function probe(fn: () => Promise<unknown>, timeoutMs: number): Promise<{ ok: boolean; latencyMs: number; error?: string }> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new HealthTimeoutError(timeoutMs)), timeoutMs);
  });
  try {
    await Promise.race([fn(), timeout]);
    return { ok: true, latencyMs: elapsed(started) };
  } catch (err) {
    return { ok: false, latencyMs: elapsed(started), error: describeError(err) };
  } finally {
    clearTimeout(timer);
  }
}

function elapsed(startedMs: number): number {
  return Math.round((performance.now() - startedMs) * 10) / 10;
}

export function describeError(err: unknown): string {
  if (err instanceof AggregateError && err.errors.length > 0) {
    // net.connect to "localhost" fails once per address family; the first says enough
    return describeError(err.errors[0]);
  }
  if (err instanceof Error && /enableOfflineQueue|Stream isn't writeable|Connection is closed/i.test(err.message)) {
    // the store fails calls at once while it has no connection, and ioredis says it in its own terms
    return "no connection (calls fail at once until Redis is back)";
  }
  if (err instanceof Error && /max retries per request/i.test(err.message)) {
    // ioredis's MaxRetriesPerRequestError says nothing about why; it means no connection
    return "no connection (ioredis gave up after retrying the command)";
  }
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    const message = err.message || err.name;
    return code && !message.includes(code) ? `${code}: ${message}` : message;
  }
  return String(err);
}

/** Where the key store lives, fit to show: a redacted URL, a cluster's seed nodes, or the audit database's location. */
export function keyStoreLocation(runtime: Runtime): string {
  if (runtime.store.kind === "redis") {
    if (runtime.config.redisUrl) return redactUrl(runtime.config.redisUrl);
    const nodes = runtime.config.redisClusterNodes;
    return nodes ? `cluster ${nodes.map((n) => (n.host.includes(":") ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`)).join(",")}` : "redis";
  }
  // the SQL key store lives in the audit database
  return runtime.db.kind === "pglite" ? "embedded" : runtime.db.location;
}

/** Pings the key store and the audit database concurrently; each answer is bounded by `timeoutMs`. */
export async function checkHealth(runtime: Runtime, timeoutMs = HEALTH_TIMEOUT_MS): Promise<Health> {
  const [store, db] = await Promise.all([
    probe(() => runtime.store.ping(), timeoutMs),
    probe(() => runtime.db.prisma.$queryRaw`SELECT 1`, timeoutMs),
  ]);
  const keyStore = { kind: runtime.store.kind, location: keyStoreLocation(runtime), ...store };
  const toolConfig = toolConfigStatus();
  const database = {
    kind: runtime.db.kind,
    location: runtime.db.kind === "pglite" ? "embedded" : runtime.db.location,
    ...db,
  };
  return {
    status: keyStore.ok && database.ok ? "ok" : "degraded",
    keyStore,
    database,
    auditMode: runtime.config.auditMode,
    version: packageJson.version,
    ...(toolConfig ? { toolConfig } : {}),
  };
}

/** What `GET /api/health` tells a caller who is not a signed-in operator: up or not, nothing else. */
export interface PublicHealth {
  status: Health["status"];
}

/**
 * `GET /api/health`: 200 when the key store and the audit database both answer, else 503. Anyone
 * (a load balancer, a tenant's API token) gets the status alone; a signed-in operator, as on
 * /status, gets the details: kinds, redacted locations, latencies, errors, audit mode, version.
 * `identify` finds the operator of the request's session; it runs beside the probes, bounded by the
 * same timeout, and when it fails (the database is down) the caller is treated as anonymous, so the
 * answer is still the status rather than an error.
 */
export async function healthResponse(
  runtime: Runtime,
  identify: () => Promise<OperatorIdentity | null>,
  timeoutMs = HEALTH_TIMEOUT_MS,
): Promise<Response> {
  const [health, operator] = await Promise.all([
    checkHealth(runtime, timeoutMs),
    probeIdentity(identify, timeoutMs),
  ]);
  const body: Health | PublicHealth = operator ? health : { status: health.status };
  return Response.json(body, {
    status: health.status === "ok" ? 200 : 503,
    headers: { "Cache-Control": "no-store" },
  });
}

async function probeIdentity(identify: () => Promise<OperatorIdentity | null>, timeoutMs: number): Promise<OperatorIdentity | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), timeoutMs);
  });
  try {
    return await Promise.race([identify().catch(() => null), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
