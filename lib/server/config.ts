import { z } from "zod";
import type { AuditMode } from "@/lib/audit/audit-writer";
import { DEFAULT_REPLAY_CACHE } from "@/lib/idempotency/replay-cache";
import { DEFAULT_SCOPE_RESULT_BYTES } from "@/lib/idempotency/scope-result-limit";

const EnvSchema = z.object({
  REDIS_URL: z.string().url().optional(),
  /** Redis Cluster seed nodes, `host:port,host:port`; instead of REDIS_URL, never with it */
  REDIS_CLUSTER_NODES: z
    .string()
    .regex(/^\s*[^\s,]+:\d{1,5}\s*(,\s*[^\s,]+:\d{1,5}\s*)*$/, "expected host:port[,host:port...]")
    .optional(),
  DATABASE_URL: z.string().url().optional(),
  PORT: z.coerce.number().int().min(1).max(65535).default(3000),
  IDEMGATE_SECRET: z.string().min(32, "IDEMGATE_SECRET must be at least 32 characters").optional(),
  IDEMGATE_DATA_DIR: z.string().min(1).default(".data"),
  IDEMGATE_AUDIT_MODE: z.enum(["durable", "async"]).default("durable"),
  IDEMGATE_REDIS_PREFIX: z.string().regex(/^[a-zA-Z0-9_.-]+$/).default("idg"),
  /** how long expired records stay visible before they are purged */
  IDEMGATE_RETENTION_MS: z.coerce.number().int().positive().default(7 * 24 * 60 * 60 * 1000),
  /** how long audit rows (executions with an outcome, suppressions) are kept */
  IDEMGATE_AUDIT_RETENTION_MS: z.coerce.number().int().positive().default(30 * 24 * 60 * 60 * 1000),
  /** how often the server runs the reconciler and purges; 0 turns it off */
  IDEMGATE_RECONCILE_INTERVAL_MS: z.coerce.number().int().min(0).default(60_000),
  /** how often the server looks for webhook deliveries that are due (a first attempt or a retry) */
  IDEMGATE_WEBHOOK_POLL_MS: z.coerce.number().int().min(100).default(2_000),
  /** done records each server process keeps to answer their duplicates without the key store; 0 turns it off */
  IDEMGATE_REPLAY_CACHE_ENTRIES: z.coerce.number().int().min(0).default(DEFAULT_REPLAY_CACHE.maxEntries),
  /** bytes of results the replay cache keeps at most */
  IDEMGATE_REPLAY_CACHE_BYTES: z.coerce.number().int().min(1024).default(DEFAULT_REPLAY_CACHE.maxBytes),
  /** bytes of stored results each scope (tenant) may hold; a result over it is stored as a placeholder; 0 turns the limit off */
  IDEMGATE_SCOPE_RESULT_BYTES: z.coerce.number().int().min(0).default(DEFAULT_SCOPE_RESULT_BYTES),
  /** the bearer token Prometheus scrapes /api/metrics with (its figures span every tenant: API tokens may not) */
  IDEMGATE_METRICS_TOKEN: z.string().min(32, "IDEMGATE_METRICS_TOKEN must be at least 32 characters").optional(),
  /** reverse proxies in front of the server that append the client's address to X-Forwarded-For; 0: none, the header is not trusted */
  IDEMGATE_TRUSTED_PROXY: z.coerce.number().int().min(0).max(10).default(0),
  /** browser origins besides the server's own that may call /mcp (an MCP client's web UI): `scheme://host[:port]`, comma-separated */
  IDEMGATE_MCP_ALLOWED_ORIGINS: z
    .string()
    .transform((list, ctx) => {
      const origins: string[] = [];
      for (const entry of list.split(",").map((e) => e.trim()).filter((e) => e !== "")) {
        const origin = exactOrigin(entry);
        if (origin === null) ctx.addIssue({ code: "custom", message: `${JSON.stringify(entry)} is not an origin: write scheme://host[:port], e.g. http://localhost:6274, with no path` });
        else origins.push(origin);
      }
      return origins;
    })
    .optional(),
  /** the built-in demo tools (payments, email, tickets): 1 on, 0 off; unset: on unless DATABASE_URL is set */
  IDEMGATE_DEMO_TOOLS: z.string().trim().pipe(z.enum(["0", "1"], { message: "expected 0 (off) or 1 (on)" })).optional(),
});

export interface Config {
  redisUrl: string | null;
  /** seed nodes of a Redis Cluster for the key store (REDIS_CLUSTER_NODES); null: none */
  redisClusterNodes: { host: string; port: number }[] | null;
  databaseUrl: string | null;
  port: number;
  secret: string | null;
  dataDir: string;
  auditMode: AuditMode;
  redisPrefix: string;
  retentionMs: number;
  auditRetentionMs: number;
  reconcileIntervalMs: number;
  /** how often due webhook deliveries are looked for (IDEMGATE_WEBHOOK_POLL_MS) */
  webhookPollMs: number;
  /** null: no replay cache */
  replayCache: { maxEntries: number; maxBytes: number } | null;
  /** bytes of stored results each scope may hold (IDEMGATE_SCOPE_RESULT_BYTES); null: no limit */
  scopeResultBytes: number | null;
  /** the bearer token that may read /api/metrics besides a signed-in operator (IDEMGATE_METRICS_TOKEN); null: none */
  metricsToken: string | null;
  /** how many reverse proxies in front of the server to trust for X-Forwarded-For (0: none) */
  trustedProxies: number;
  /** browser origins besides the server's own that may call /mcp (IDEMGATE_MCP_ALLOWED_ORIGINS), each as URL.origin spells it */
  mcpAllowedOrigins: string[];
  /** the built-in demo tools are served (IDEMGATE_DEMO_TOOLS; see demoToolsEnabled in lib/tools/demo-switch.ts) */
  demoTools: boolean;
}

/** Reads the configuration from the environment; a bad value is a readable error, not a default. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const blank = (v: string | undefined) => (v === undefined || v.trim() === "" ? undefined : v);
  const parsed = EnvSchema.safeParse(Object.fromEntries(Object.keys(EnvSchema.shape).map((k) => [k, blank(env[k])])));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new Error(`invalid configuration:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  if (e.REDIS_URL !== undefined && e.REDIS_CLUSTER_NODES !== undefined) {
    throw new Error("invalid configuration:\n  REDIS_CLUSTER_NODES: set REDIS_URL (one Redis server) or REDIS_CLUSTER_NODES (a Redis Cluster), not both");
  }
  return {
    redisUrl: e.REDIS_URL ?? null,
    redisClusterNodes: e.REDIS_CLUSTER_NODES === undefined ? null : parseClusterNodes(e.REDIS_CLUSTER_NODES),
    databaseUrl: e.DATABASE_URL ?? null,
    port: e.PORT,
    secret: e.IDEMGATE_SECRET ?? null,
    dataDir: e.IDEMGATE_DATA_DIR,
    auditMode: e.IDEMGATE_AUDIT_MODE,
    redisPrefix: e.IDEMGATE_REDIS_PREFIX,
    retentionMs: e.IDEMGATE_RETENTION_MS,
    auditRetentionMs: e.IDEMGATE_AUDIT_RETENTION_MS,
    reconcileIntervalMs: e.IDEMGATE_RECONCILE_INTERVAL_MS,
    webhookPollMs: e.IDEMGATE_WEBHOOK_POLL_MS,
    replayCache: e.IDEMGATE_REPLAY_CACHE_ENTRIES === 0 ? null : { maxEntries: e.IDEMGATE_REPLAY_CACHE_ENTRIES, maxBytes: e.IDEMGATE_REPLAY_CACHE_BYTES },
    scopeResultBytes: e.IDEMGATE_SCOPE_RESULT_BYTES === 0 ? null : e.IDEMGATE_SCOPE_RESULT_BYTES,
    metricsToken: e.IDEMGATE_METRICS_TOKEN ?? null,
    trustedProxies: e.IDEMGATE_TRUSTED_PROXY,
    mcpAllowedOrigins: e.IDEMGATE_MCP_ALLOWED_ORIGINS ?? [],
    demoTools: e.IDEMGATE_DEMO_TOOLS === undefined ? e.DATABASE_URL === undefined : e.IDEMGATE_DEMO_TOOLS === "1",
  };
}

/** `http://Localhost:6274` → `http://localhost:6274`; null for anything but a bare http(s) origin. */
function exactOrigin(entry: string): string | null {
  try {
    const url = new URL(entry);
    if ((url.protocol !== "http:" && url.protocol !== "https:") || url.href !== `${url.origin}/`) return null;
    return url.origin;
  } catch {
    return null;
  }
}

/** `host:port,host:port` → seed nodes; the port is after the last colon (`[::1]:7000` works too). */
export function parseClusterNodes(list: string): { host: string; port: number }[] {
  return list.split(",").map((entry) => {
    const node = entry.trim();
    const at = node.lastIndexOf(":");
    const host = node.slice(0, at).replace(/^\[(.*)\]$/, "$1");
    const port = Number(node.slice(at + 1));
    if (host === "" || !Number.isInteger(port) || port < 1 || port > 65535) {
      throw new Error(`invalid configuration:\n  REDIS_CLUSTER_NODES: bad node ${JSON.stringify(node)} (expected host:port)`);
    }
    return { host, port };
  });
}
