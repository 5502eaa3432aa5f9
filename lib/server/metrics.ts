import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { CallEvent } from "@/lib/idempotency/engine";

interface Metrics {
  registry: Registry;
  calls: Counter<"tool" | "result">;
  cachedAnswers: Counter<"tool">;
  clientReplaysIgnored: Counter;
  storeSeconds: Histogram<"tool">;
  auditSeconds: Histogram<"tool">;
  keys: Gauge<"state">;
  openAnomalies: Gauge<"type">;
  scopeResultBytes: Gauge<"scope">;
  up: Gauge<"component">;
}

/**
 * The deployment's figures, the same from every process (aggregate them with max, not sum); read
 * when scraped (lib/process/deployment-figures.ts). null: the source did not answer, its series are
 * left out rather than shown as zero.
 */
export interface DeploymentFigures {
  up: { key_store: boolean; audit_log: boolean };
  keys: Record<string, number> | null;
  openAnomalies: Record<string, number> | null;
  /** stored result bytes by scope, which IDEMGATE_SCOPE_RESULT_BYTES limits */
  scopeResultBytes: Record<string, number> | null;
}

const holder = globalThis as unknown as { __idemgateMetrics?: Metrics };

const BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/** Prometheus metrics of this process, created once (hot reloads keep them). */
export function metrics(): Metrics {
  if (holder.__idemgateMetrics) return holder.__idemgateMetrics;
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "idemgate_process_" });
  holder.__idemgateMetrics = {
    registry,
    calls: new Counter({
      name: "idemgate_calls_total",
      help: "Tool calls by result: executed, replayed, read, conflict, stuck, mismatch, missing_key, unavailable (fail-closed), tool_failed (not run), outcome_unknown, unknown (duplicate of an unknown key), abandoned, final_error",
      labelNames: ["tool", "result"],
      registers: [registry],
    }),
    cachedAnswers: new Counter({
      name: "idemgate_cached_answers_total",
      help: "Duplicates of done keys (replays and mismatches) answered from the process's replay cache, without the key store",
      labelNames: ["tool"],
      registers: [registry],
    }),
    clientReplaysIgnored: new Counter({
      name: "idemgate_client_replays_ignored_total",
      help: "Replays reported by clients (POST /api/v1/replays) that matched no done key of the caller's scope with that execution, so were not recorded",
      registers: [registry],
    }),
    storeSeconds: new Histogram({ name: "idemgate_store_seconds", help: "Key store time per call", labelNames: ["tool"], buckets: BUCKETS, registers: [registry] }),
    auditSeconds: new Histogram({ name: "idemgate_audit_seconds", help: "Synchronous audit log time per call (intent writes)", labelNames: ["tool"], buckets: BUCKETS, registers: [registry] }),
    keys: new Gauge({ name: "idemgate_keys", help: "Keys in the key store by state, read when scraped (deployment-wide: the same from every process)", labelNames: ["state"], registers: [registry] }),
    openAnomalies: new Gauge({ name: "idemgate_anomalies_open", help: "Open anomalies by type, read when scraped (deployment-wide)", labelNames: ["type"], registers: [registry] }),
    scopeResultBytes: new Gauge({
      name: "idemgate_scope_result_bytes",
      help: "Bytes of stored results each scope (tenant) holds, counted until the hour their keys expire, read when scraped (deployment-wide); IDEMGATE_SCOPE_RESULT_BYTES limits it",
      labelNames: ["scope"],
      registers: [registry],
    }),
    up: new Gauge({ name: "idemgate_up", help: "1 when the component (key_store, audit_log) answered this scrape's ping, else 0", labelNames: ["component"], registers: [registry] }),
  };
  return holder.__idemgateMetrics;
}

export function recordCall(event: CallEvent): void {
  const m = metrics();
  m.calls.inc({ tool: event.tool, result: event.result });
  if (event.cached) m.cachedAnswers.inc({ tool: event.tool });
  if (event.storeMs > 0) m.storeSeconds.observe({ tool: event.tool }, event.storeMs / 1000);
  if (event.auditMs > 0) m.auditSeconds.observe({ tool: event.tool }, event.auditMs / 1000);
}

export function recordIgnoredClientReplays(n: number): void {
  if (n > 0) metrics().clientReplaysIgnored.inc(n);
}

export function setDeploymentFigures(figures: DeploymentFigures): void {
  const m = metrics();
  for (const [component, ok] of Object.entries(figures.up)) m.up.set({ component }, ok ? 1 : 0);
  m.keys.reset();
  for (const [state, n] of Object.entries(figures.keys ?? {})) m.keys.set({ state }, n);
  m.openAnomalies.reset();
  for (const [type, n] of Object.entries(figures.openAnomalies ?? {})) m.openAnomalies.set({ type }, n);
  m.scopeResultBytes.reset();
  for (const [scope, n] of Object.entries(figures.scopeResultBytes ?? {})) m.scopeResultBytes.set({ scope }, n);
}
