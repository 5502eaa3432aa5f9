import { countOpenAnomalies } from "@/lib/anomalies/anomalies";
import { ANOMALY_TYPES } from "@/lib/anomalies/anomaly-types";
import { KEY_STATES } from "@/lib/idempotency/record";
import type { DeploymentFigures } from "@/lib/server/metrics";
import type { Runtime } from "@/lib/server/runtime";
import { checkHealth } from "./health";

/**
 * What the deployment-wide gauges of /api/metrics show, read when Prometheus scrapes: whether each
 * store answers (the health check's pings, bounded by its timeout), keys by state (the store's
 * counters and indexes, no scan) and open anomalies by type. A source that fails is reported as
 * down and its figures left out, so a scrape never fails because a store does.
 */
export async function readDeploymentFigures(runtime: Runtime): Promise<DeploymentFigures> {
  const [health, counts, anomalies, resultBytes] = await Promise.all([
    checkHealth(runtime),
    runtime.store.counts(Date.now()).catch(() => null),
    countOpenAnomalies(runtime.db.prisma).catch(() => null),
    runtime.store.resultBytes ? runtime.store.resultBytes.all(Date.now()).catch(() => null) : Promise.resolve(null),
  ]);
  return {
    up: { key_store: health.keyStore.ok && counts !== null, audit_log: health.database.ok && anomalies !== null },
    keys: counts && Object.fromEntries(KEY_STATES.map((state) => [state, counts[state] ?? 0])),
    openAnomalies: anomalies && Object.fromEntries(ANOMALY_TYPES.map((type) => [type, anomalies[type] ?? 0])),
    scopeResultBytes: resultBytes && Object.fromEntries(resultBytes),
  };
}

/** How long a process serves the deployment figures it read before reading them again. */
export const DEPLOYMENT_FIGURES_CACHE_MS = 5_000;

const cached = new WeakMap<Runtime, { untilMs: number; figures: Promise<DeploymentFigures> }>();

/**
 * The deployment figures, read at most once per DEPLOYMENT_FIGURES_CACHE_MS per process (and once
 * for scrapes arriving together): counting keys by state costs the key store a few dozen commands,
 * and the figures move slowly next to a scrape interval.
 */
export function cachedDeploymentFigures(runtime: Runtime, nowMs = Date.now()): Promise<DeploymentFigures> {
  const hit = cached.get(runtime);
  if (hit && hit.untilMs > nowMs) return hit.figures;
  const figures = readDeploymentFigures(runtime);
  const entry = { untilMs: nowMs + DEPLOYMENT_FIGURES_CACHE_MS, figures };
  cached.set(runtime, entry);
  figures.catch(() => {
    if (cached.get(runtime) === entry) cached.delete(runtime);
  });
  return figures;
}
