import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApiToken } from "@/lib/auth/api-tokens";
import { metricsBearerAllowed } from "@/lib/auth/metrics-access";
import type { KeyStore } from "@/lib/idempotency/key-store";
import { cachedDeploymentFigures, DEPLOYMENT_FIGURES_CACHE_MS } from "@/lib/process/deployment-figures";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { demoTools } from "@/lib/tools/demo";
import { ToolRegistry } from "@/lib/tools/registry";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { installTestRuntime } from "@/test/support/runtime";

/**
 * /api/metrics shows every tenant's figures: a tenant's API token may not read it, the deployment's
 * metrics token may; and a burst of scrapes reads the deployment figures once per 5 s per process.
 */
const METRICS_TOKEN = "m".repeat(40);

let pg: TestPostgres;
let runtime: Runtime;
let countsCalls = 0;

beforeAll(async () => {
  pg = await createTestPostgres("metrics_access");
  const sql = new SqlKeyStore(pg.db);
  const store = new Proxy(sql, {
    get(target, prop, receiver) {
      if (prop === "counts") return (nowMs: number) => (countsCalls++, target.counts(nowMs));
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as KeyStore;
  runtime = installTestRuntime({ db: pg.db, store, registry: new ToolRegistry(demoTools) });
});

afterAll(async () => {
  await runtime?.close();
  await pg?.drop();
});

const bearer = (token: string) => new Headers({ authorization: `Bearer ${token}` });

describe("who may read /api/metrics", () => {
  it("refuses a tenant's API token with 403, even when no metrics token is configured", async () => {
    const { token } = await createApiToken(pg.db.prisma, { scope: "tenant-a", actor: "test" });
    for (const metricsToken of [null, METRICS_TOKEN]) {
      runtime.config.metricsToken = metricsToken;
      await expect(metricsBearerAllowed(bearer(token), runtime)).rejects.toMatchObject({ code: "forbidden", status: 403 });
    }
  });

  it("takes the deployment's metrics token; refuses another or an unknown one with 401", async () => {
    runtime.config.metricsToken = METRICS_TOKEN;
    await expect(metricsBearerAllowed(bearer(METRICS_TOKEN), runtime)).resolves.toBe(true);
    await expect(metricsBearerAllowed(bearer("m".repeat(39) + "n"), runtime)).rejects.toMatchObject({ code: "unauthorized", status: 401 });
    runtime.config.metricsToken = null;
    await expect(metricsBearerAllowed(bearer(METRICS_TOKEN), runtime)).rejects.toMatchObject({ code: "unauthorized" });
  });

  it("leaves a request without a bearer token to the console session check", async () => {
    await expect(metricsBearerAllowed(new Headers(), runtime)).resolves.toBe(false);
  });
});

describe("the deployment figures behind /api/metrics", () => {
  it("are read once for scrapes within 5 s, and again after", async () => {
    const t0 = 1_900_000_000_000;
    const before = countsCalls;
    const [a, b] = await Promise.all([cachedDeploymentFigures(runtime, t0), cachedDeploymentFigures(runtime, t0)]);
    expect(a).toBe(b);
    expect(a.up.key_store).toBe(true);
    await cachedDeploymentFigures(runtime, t0 + DEPLOYMENT_FIGURES_CACHE_MS - 1);
    expect(countsCalls - before).toBe(1);
    await cachedDeploymentFigures(runtime, t0 + DEPLOYMENT_FIGURES_CACHE_MS);
    expect(countsCalls - before).toBe(2);
  });
});
