import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOperator, findOperator } from "@/lib/auth/operators";
import { loadConfig } from "@/lib/server/config";
import { healthResponse } from "@/lib/process/health";
import { openRuntime, type Runtime } from "@/lib/server/runtime";
import { readyLine } from "@/lib/process/start-server";
import { createTestPostgres, REDIS_TEST_URL, type TestPostgres } from "@/test/support/databases";
import { deleteRedisPrefix } from "@/test/support/stores";

// Secrets in every part of the URL where one can be given: user info, and a `?password=` query.
function withSecrets(url: string, secret: string): string {
  const u = new URL(url);
  u.username = "postgres";
  u.password = `${secret}-userinfo`;
  u.search = `?password=${secret}-query&application_name=idemgate-health-test`;
  return u.toString();
}

const DB_SECRET = "db-s3cret";
const REDIS_SECRET = "redis-s3cret";

let postgres: TestPostgres;
let runtime: Runtime;
let dataDir: string;
const prefix = `idgtest-health-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  postgres = await createTestPostgres("health");
  dataDir = await mkdtemp(path.join(os.tmpdir(), "idemgate-health-"));
  const redis = new URL(REDIS_TEST_URL);
  redis.username = "default";
  redis.password = `${REDIS_SECRET}-userinfo`;
  redis.search = `?password=${REDIS_SECRET}-query`;
  runtime = await openRuntime({
    config: {
      ...loadConfig({} as NodeJS.ProcessEnv),
      dataDir,
      databaseUrl: withSecrets(postgres.url, DB_SECRET),
      redisUrl: redis.toString(),
      redisPrefix: prefix,
    },
  });
});

afterAll(async () => {
  await runtime?.close();
  await postgres?.drop();
  await deleteRedisPrefix(prefix);
  await rm(dataDir, { recursive: true, force: true });
});

function expectNoSecrets(text: string): void {
  expect(text).not.toMatch(/s3cret|password|\*\*\*|application_name/);
}

describe("GET /api/health (healthResponse, as the route calls it)", () => {
  it("answers a caller without a session with the status alone", async () => {
    const res = await healthResponse(runtime, async () => null);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ status: "ok" });
    expectNoSecrets(text);
  });

  it("answers a signed-in operator with the details, URLs without user info or query string", async () => {
    const created = await createOperator(runtime.db.prisma, { email: `health-${prefix}@example.com`, password: "a-long-enough-password", role: "viewer" });
    const res = await healthResponse(runtime, () => findOperator(runtime.db.prisma, created.id));
    expect(res.status).toBe(200);
    const text = await res.text();
    const dbUrl = new URL(postgres.url);
    expect(JSON.parse(text)).toMatchObject({
      status: "ok",
      keyStore: { kind: "redis", ok: true, location: `redis://${new URL(REDIS_TEST_URL).host}` },
      database: { kind: "postgres", ok: true, location: `postgresql://${dbUrl.host}${dbUrl.pathname}` },
      auditMode: "durable",
      version: expect.any(String),
    });
    expectNoSecrets(text);
  });

  it("treats a session it cannot check (the database does not answer) as no session", async () => {
    const failing = await healthResponse(runtime, () => Promise.reject(new Error("connection refused")));
    expect(await failing.json()).toEqual({ status: "ok" });
    const hanging = await healthResponse(runtime, () => new Promise(() => {}), 200);
    expect(await hanging.json()).toEqual({ status: "ok" });
  });

  it("the start-up log names the stores without their secrets", () => {
    const line = readyLine(runtime, 42);
    const dbUrl = new URL(postgres.url);
    expect(line).toBe(
      `idemgate: key store redis (redis://${new URL(REDIS_TEST_URL).host}), audit database postgres (postgresql://${dbUrl.host}${dbUrl.pathname}), ` +
        `audit mode durable; ready in 42 ms`,
    );
    expectNoSecrets(line);
  });
});

describe("GET /api/health of a degraded server", () => {
  it("answers 503, still with the status alone for a caller without a session", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-health-down-"));
    const down = await openRuntime({
      config: {
        ...loadConfig({} as NodeJS.ProcessEnv),
        dataDir: dir,
        databaseUrl: withSecrets(postgres.url, DB_SECRET),
        // nothing listens on port 1
        redisUrl: `redis://:${REDIS_SECRET}@127.0.0.1:1/?password=${REDIS_SECRET}`,
        redisPrefix: prefix,
      },
    });
    try {
      const anonymous = await healthResponse(down, async () => null, 500);
      expect(anonymous.status).toBe(503);
      expect(await anonymous.json()).toEqual({ status: "degraded" });
      const operator = await createOperator(down.db.prisma, { email: `health-down-${prefix}@example.com`, password: "a-long-enough-password", role: "operator" });
      const detailed = await healthResponse(down, () => findOperator(down.db.prisma, operator.id), 500);
      expect(detailed.status).toBe(503);
      const text = await detailed.text();
      expect(JSON.parse(text)).toMatchObject({ status: "degraded", keyStore: { kind: "redis", ok: false, location: "redis://127.0.0.1:1/" }, database: { ok: true } });
      expectNoSecrets(text);
    } finally {
      await down.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
