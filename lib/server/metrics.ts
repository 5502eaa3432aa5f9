import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { CallEvent } from "@/lib/idempotency/engine";

interface Metrics {
  registry: Registry;
  calls: Counter<"tool" | "result">;
  cachedAnswers: Counter<"tool">;
  storeSeconds: Histogram<"tool">;
  auditSeconds: Histogram<"tool">;
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
    storeSeconds: new Histogram({ name: "idemgate_store_seconds", help: "Key store time per call", labelNames: ["tool"], buckets: BUCKETS, registers: [registry] }),
    auditSeconds: new Histogram({ name: "idemgate_audit_seconds", help: "Synchronous audit log time per call (intent writes)", labelNames: ["tool"], buckets: BUCKETS, registers: [registry] }),
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
