import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "@/lib/server/config";
import { reconcile } from "@/lib/anomalies/reconcile";
import { reconcileDeps } from "@/lib/process/background";
import { seedDemoTraffic } from "@/lib/process/demo-traffic";
import { openRuntime } from "@/lib/server/runtime";

describe("demo traffic of a first start", () => {
  it("leaves replays, a decline, a released error, a stale suppression, and keys for an operator behind, each side effect once", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-demo-"));
    const runtime = await openRuntime({ config: { ...loadConfig({} as NodeJS.ProcessEnv), dataDir: dir } });
    try {
      const calls = await seedDemoTraffic(runtime);
      expect(calls).toBe(15);
      const { prisma } = runtime.db;
      expect(await prisma.demoCharge.count({ where: { idempotencyKey: "order-1001" } })).toBe(1);
      expect(await prisma.demoCharge.count({ where: { idempotencyKey: { in: ["order-1004", "order-1005"] } } })).toBe(0);
      expect(await prisma.demoTicket.count()).toBe(1);
      // what the operator finds to decide: an unknown posting and a crashed one (stuck once its lease
      // passes), of a tool without a status probe, which the reconciler cannot settle by itself
      const held = await Promise.all(["posting-3001", "posting-3002"].map((k) => runtime.store.get("demo", k)));
      expect(held.map((r) => [r?.tool, r?.status])).toEqual([
        ["ledger.record", "unknown"],
        ["ledger.record", "inflight"],
      ]);
      expect(runtime.registry.proberFor(runtime.registry.get("ledger.record"), prisma)).toBeNull();
      const report = await reconcile(reconcileDeps(runtime), { nowMs: Date.now() + 2 * 60_000, settleMs: 0, effectGraceMs: 0 });
      expect(report.probed.filter((p) => p.scope === "demo")).toEqual([]);
      expect((await runtime.store.get("demo", "posting-3001"))?.status).toBe("unknown");
      expect((await runtime.store.get("demo", "posting-3002"))?.status).toBe("inflight"); // stuck: past its lease
      expect(await runtime.store.get("demo", "order-1005")).toBeNull();
      expect(await prisma.suppression.count({ where: { kind: "replay" } })).toBe(6);
      expect(await prisma.suppression.count({ where: { key: "welcome-ada", session: "agent-run-4", originalSession: "agent-run-1" } })).toBe(1);
    } finally {
      await runtime.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
