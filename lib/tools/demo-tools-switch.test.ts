import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { loadConfig } from "@/lib/server/config";
import { demoToolsEnabled } from "./demo-switch";
import { seedDemoTraffic } from "@/lib/process/demo-traffic";
import { openRuntime } from "@/lib/server/runtime";
import type { ToolDefinition } from "./define-tool";
import { ToolRegistry } from "./registry";

// The built-in demo tools are on for the embedded default, off when DATABASE_URL is set (a
// production deployment), and IDEMGATE_DEMO_TOOLS=1 / 0 overrides either way.

const PG = "postgresql://postgres@127.0.0.1:5432/idemgate";
const UPSTREAM = JSON.stringify([{ name: "billing.create_invoice", url: "http://127.0.0.1:9/invoices" }]);

describe("IDEMGATE_DEMO_TOOLS", () => {
  it("defaults to on without DATABASE_URL and off with it; 1 and 0 override", () => {
    const cases: [Record<string, string>, boolean][] = [
      [{}, true],
      [{ DATABASE_URL: "" }, true], // blank, as test servers set it: the embedded database
      [{ DATABASE_URL: PG }, false],
      [{ DATABASE_URL: PG, IDEMGATE_DEMO_TOOLS: "1" }, true],
      [{ IDEMGATE_DEMO_TOOLS: "0" }, false],
      [{ DATABASE_URL: PG, IDEMGATE_DEMO_TOOLS: "0" }, false],
      [{ IDEMGATE_DEMO_TOOLS: " 1 " }, true],
    ];
    for (const [env, on] of cases) {
      expect(demoToolsEnabled(env), JSON.stringify(env)).toBe(on);
      expect(loadConfig(env as NodeJS.ProcessEnv).demoTools, JSON.stringify(env)).toBe(on);
    }
  });

  it("refuses any other value at start", () => {
    expect(() => loadConfig({ IDEMGATE_DEMO_TOOLS: "yes" } as unknown as NodeJS.ProcessEnv)).toThrow(/IDEMGATE_DEMO_TOOLS: expected 0 \(off\) or 1 \(on\)/);
  });
});

describe("lib/tools/config.ts", () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
    vi.resetModules();
  });

  /** the tools the server would serve with this environment: config.ts loaded afresh */
  async function servedTools(env: Record<string, string>): Promise<string[]> {
    process.env = { ...saved, DATABASE_URL: "", IDEMGATE_DEMO_TOOLS: "", IDEMGATE_UPSTREAM_TOOLS: UPSTREAM, ...env };
    vi.resetModules();
    const { default: tools } = (await import("./config")) as { default: ToolDefinition[] };
    return tools.map((t) => t.name);
  }

  it("serves the demo tools on the embedded default, not with DATABASE_URL unless IDEMGATE_DEMO_TOOLS=1; configured tools either way", async () => {
    expect(await servedTools({})).toEqual(expect.arrayContaining(["payments.charge", "email.send", "tickets.create", "billing.create_invoice"]));
    expect(await servedTools({ DATABASE_URL: PG })).toEqual(["billing.create_invoice"]);
    expect(await servedTools({ DATABASE_URL: PG, IDEMGATE_DEMO_TOOLS: "1" })).toContain("payments.charge");
    expect(await servedTools({ IDEMGATE_DEMO_TOOLS: "0" })).toEqual(["billing.create_invoice"]);
  });
});

describe("first-start demo traffic without the demo tools", () => {
  it("is skipped, not failed: no calls, no keys, no audit rows", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-nodemo-"));
    const opened = await openRuntime({ config: { ...loadConfig({ IDEMGATE_DEMO_TOOLS: "0" } as unknown as NodeJS.ProcessEnv), dataDir: dir } });
    try {
      const runtime = { ...opened, registry: new ToolRegistry([]) };
      expect(await seedDemoTraffic(runtime)).toBe(0);
      expect(await runtime.db.prisma.execution.count()).toBe(0);
      expect(await runtime.store.get("demo", "order-1001")).toBeNull();
    } finally {
      await opened.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 180_000); // opens an embedded runtime and waits out the first start's demo traffic
});
