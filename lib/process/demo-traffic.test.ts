import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "@/lib/server/config";
import { seedDemoTraffic } from "@/lib/process/demo-traffic";
import { openRuntime } from "@/lib/server/runtime";

describe("demo traffic of a first start", () => {
  it("leaves replays, a decline, a released error, a crash and a stale suppression behind, each side effect once", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-demo-"));
    const runtime = await openRuntime({ config: { ...loadConfig({} as NodeJS.ProcessEnv), dataDir: dir } });
    try {
      const calls = await seedDemoTraffic(runtime);
      expect(calls).toBe(14);
      const { prisma } = runtime.db;
      expect(await prisma.demoCharge.count({ where: { idempotencyKey: "order-1001" } })).toBe(1);
      expect(await prisma.demoCharge.count({ where: { idempotencyKey: "order-1006" } })).toBe(1); // crashed after its effect
      expect(await prisma.demoCharge.count({ where: { idempotencyKey: { in: ["order-1004", "order-1005"] } } })).toBe(0);
      expect(await prisma.demoTicket.count()).toBe(1);
      expect((await runtime.store.get("demo", "order-1006"))?.status).toBe("inflight");
      expect(await runtime.store.get("demo", "order-1005")).toBeNull();
      expect(await prisma.suppression.count({ where: { kind: "replay" } })).toBe(6);
      expect(await prisma.suppression.count({ where: { key: "welcome-ada", session: "agent-run-4", originalSession: "agent-run-1" } })).toBe(1);
    } finally {
      await runtime.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
