import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Runtime } from "@/lib/server/runtime";
import { metrics, setDeploymentFigures } from "@/lib/server/metrics";
import { ToolRegistry } from "@/lib/tools/registry";
import { installTestRuntime } from "@/test/support/runtime";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";
import { readDeploymentFigures } from "./deployment-figures";

// The deployment-wide gauges of /api/metrics (keys by state, open anomalies, stores up) read from
// a real Redis key store and a real PostgreSQL audit log, as Prometheus would scrape them.

async function scrape(runtime: Runtime): Promise<string> {
  setDeploymentFigures(await readDeploymentFigures(runtime));
  return metrics().registry.metrics();
}

function reserve(t: StoreUnderTest, key: string, nowMs: number) {
  return t.store.begin({
    scope: "figures",
    key,
    tool: "payments.charge",
    fingerprint: "f".repeat(64),
    leaseMs: 60_000,
    nowMs,
    fallback: false,
    session: null,
    executionId: randomUUID(),
    takeoverStuck: false,
    retryUnknown: false,
  });
}

describe("deployment figures for Prometheus", () => {
  let t: StoreUnderTest;
  let runtime: Runtime;

  beforeAll(async () => {
    t = await openTestStore("redis");
    runtime = installTestRuntime({ db: t.db, store: t.store, registry: new ToolRegistry([]) });
  });

  afterAll(async () => {
    await runtime?.close().catch(() => {});
    await t?.cleanup();
  });

  it("counts keys by state and open anomalies by type, and says both stores answer", async () => {
    const now = Date.now();
    const unknown = await reserve(t, "k-unknown", now);
    const done = await reserve(t, "k-done", now);
    await reserve(t, "k-running", now);
    await reserve(t, "k-stuck", now - 120_000); // its lease ended a minute ago: a crashed holder
    if (unknown.kind !== "reserved" || done.kind !== "reserved") throw new Error("not reserved");
    await t.store.markUnknown("figures", "k-unknown", unknown.token, "timed out after 400 ms", now);
    await t.store.complete("figures", "k-done", done.token, { status: 200, body: "{}", final: false }, 60_000, now);
    await t.db.prisma.anomaly.create({
      data: { id: randomUUID(), type: "stale_suppression", dedupeKey: `test:${randomUUID()}`, tool: "payments.charge", summary: "test", evidence: {}, detectedAt: new Date(), updatedAt: new Date() },
    });

    const text = await scrape(runtime);
    for (const [state, n] of Object.entries({ inflight: 1, stuck: 1, unknown: 1, done: 1, expired: 0 })) {
      expect(text).toContain(`idemgate_keys{state="${state}"} ${n}\n`);
    }
    expect(text).toContain('idemgate_anomalies_open{type="stale_suppression"} 1\n');
    expect(text).toContain('idemgate_anomalies_open{type="orphan_unknown_outcome"} 0\n');
    expect(text).toContain('idemgate_up{component="key_store"} 1\n');
    expect(text).toContain('idemgate_up{component="audit_log"} 1\n');
  });

  it("reports a key store that does not answer as down and leaves its counts out, rather than zeros", async () => {
    await t.store.close();
    const text = await scrape(runtime);
    expect(text).toContain('idemgate_up{component="key_store"} 0\n');
    expect(text).toContain('idemgate_up{component="audit_log"} 1\n');
    expect(text).not.toMatch(/^idemgate_keys\{/m);
    expect(text).toMatch(/^idemgate_anomalies_open\{type="stale_suppression"\} 1$/m);
  });
});
