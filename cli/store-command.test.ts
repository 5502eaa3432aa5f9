import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { KeySpace, bucketOf, memberOf } from "@/lib/store/redis/key-names";
import { RedisKeyStore } from "@/lib/store/redis/redis-key-store";
import { createTestPostgres, REDIS_TEST_URL, type TestPostgres } from "@/test/support/databases";
import { deleteRedisPrefix } from "@/test/support/stores";

// the CLI runs as a process (tsx compiles it first): seconds on a busy machine
vi.setConfig({ testTimeout: 120_000 });

const BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "bin", "idemgate.mjs");
const T0 = 1_800_000_000_000;
const prefix = `idgclistore${randomUUID().slice(0, 8)}`;
let pg: TestPostgres;
let redis: Redis;

beforeAll(async () => {
  pg = await createTestPostgres("cli_store");
  redis = new Redis(REDIS_TEST_URL, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  await deleteRedisPrefix(prefix);
  redis.disconnect();
  await pg.drop();
});

function idemgate(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: tmpdir(),
      env: { ...process.env, DATABASE_URL: pg.url, REDIS_URL: REDIS_TEST_URL, REDIS_CLUSTER_NODES: "", IDEMGATE_REDIS_PREFIX: prefix },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => (stdout += c));
    child.stderr.on("data", (c) => (stderr += c));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

it("store rebuild-indexes turns records of the earlier hash encoding into current ones, listed again; a second run rewrites nothing", async () => {
  const ks = new KeySpace(prefix);
  const scope = "tenant-a";
  for (const [i, key] of ["old-1", "old-2"].entries()) {
    const base = ks.base(bucketOf(scope, key));
    // as earlier versions wrote a done record: one hash, seven index entries
    await redis.hset(ks.record(scope, key), "scope", scope, "key", key, "tool", "email.send", "fingerprint", "fp", "status", "done",
      "token", String(10 + i), "createdAtMs", String(T0 + i), "fallback", "0", "executionId", `e-${i}`, "completedAtMs", String(T0 + 5),
      "expiresAtMs", String(T0 + 86_400_000), "resultStatus", "200", "resultBody", `{"n":${i}}`, "resultFinal", "0");
    for (const index of ["st:done", "stt:done:email.send", `sts:done:${scope}`]) await redis.zadd(base + index, T0 + 86_400_000, memberOf(scope, key));
    for (const index of ["created", "tool:email.send", `scope:${scope}`]) await redis.zadd(base + index, T0 + i, memberOf(scope, key));
    await redis.zadd(`${base}lex`, 0, `${key}\n${scope}\n${T0 + i}`);
  }
  const first = await idemgate(["store", "rebuild-indexes"]);
  expect(first.stderr).toBe("");
  expect(first.code).toBe(0);
  expect(first.stdout).toMatch(/Rebuilt the indexes of 2 records \(2 rewritten from the earlier encoding; \d+ index keys dropped first\)/);

  const store = new RedisKeyStore(new Redis(REDIS_TEST_URL, { maxRetriesPerRequest: 1 }), { prefix });
  try {
    expect(await store.get(scope, "old-2")).toMatchObject({ status: "done", executionId: "e-1", result: { status: 200, body: '{"n":1}', final: false } });
    const page = await store.list({ state: "done", limit: 10, nowMs: T0 + 10 });
    expect(page.items.map((r) => r.key)).toEqual(["old-2", "old-1"]);
    expect(await store.counts(T0 + 10)).toMatchObject({ done: 2, expired: 0 });
  } finally {
    await store.close();
  }
  const second = await idemgate(["store", "rebuild-indexes"]);
  expect(second.code).toBe(0);
  expect(second.stdout).toMatch(/Rebuilt the indexes of 2 records \(0 rewritten/);
});
