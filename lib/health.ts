import packageJson from "@/package.json";
import type { AuditMode } from "@/lib/audit/audit-writer";
import { redactUrl } from "@/lib/redact-url";
import type { Runtime } from "@/lib/runtime";

export interface ComponentHealth<Kind extends string> {
  kind: Kind;
  /** a URL without its password, or "embedded" / the embedded data directory */
  location: string;
  ok: boolean;
  latencyMs: number;
  error?: string;
}

export interface Health {
  status: "ok" | "degraded";
  keyStore: ComponentHealth<"redis" | "postgres" | "pglite">;
  database: ComponentHealth<"postgres" | "pglite">;
  auditMode: AuditMode;
  version: string;
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

function keyStoreLocation(runtime: Runtime): string {
  if (runtime.store.kind === "redis") return runtime.config.redisUrl ? redactUrl(runtime.config.redisUrl) : "redis";
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
  };
}
