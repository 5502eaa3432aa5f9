import { randomUUID } from "node:crypto";
import type { Socket } from "node:net";
import { Redis } from "ioredis";
import { afterEach, describe, expect, it } from "vitest";
import { coalesceWrites } from "./coalesce-writes";

const REDIS_URL = process.env.REDIS_TEST_URL ?? "redis://127.0.0.1:6379";
const prefix = `idgtest-coalesce-${randomUUID().slice(0, 8)}:`;
const opened: Redis[] = [];

async function connection(coalesced: boolean): Promise<Redis> {
  // fails, never skips, when Redis is not there
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: true });
  redis.on("error", () => {});
  opened.push(redis);
  if (coalesced) coalesceWrites(redis);
  await redis.connect();
  return redis;
}

/** How many times the connection's socket handed bytes to the system while `send` ran and its replies came. */
async function writesDuring<T>(redis: Redis, send: () => Promise<T>): Promise<{ writes: number; result: T }> {
  const socket = redis.stream as Socket & { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void };
  const write = socket._write;
  const writev = socket._writev;
  let writes = 0;
  socket._write = function (...a: unknown[]) {
    writes++;
    return write.apply(this, a);
  };
  socket._writev = function (...a: unknown[]) {
    writes++;
    return writev.apply(this, a);
  };
  try {
    const result = await send();
    return { writes, result };
  } finally {
    socket._write = write;
    socket._writev = writev;
  }
}

afterEach(async () => {
  const redis = opened[0];
  if (redis?.status === "ready") {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
  }
  for (const r of opened.splice(0)) r.disconnect();
});

describe("coalesceWrites", () => {
  const twenty = (redis: Redis) => Promise.all(Array.from({ length: 20 }, (_, i) => redis.set(`${prefix}${i}`, String(i)).then(() => redis.get(`${prefix}${i}`))));

  it("sends the commands of one turn in one write, each answered with its own reply", async () => {
    // the same twenty commands without it: one write each (what this test would see if it did nothing)
    const plain = await writesDuring(await connection(false), () => twenty(opened[0]));
    expect(plain.writes).toBeGreaterThanOrEqual(20);

    const redis = await connection(true);
    // twenty SETs in one turn, then the twenty GETs their replies release (one read, one turn)
    const { writes, result } = await writesDuring(redis, () => twenty(redis));
    expect(result).toEqual(Array.from({ length: 20 }, (_, i) => String(i)));
    expect(writes).toBeLessThanOrEqual(4);
  });

  it("sends a command sent alone in its own turn, and one turn after another", async () => {
    const redis = await connection(true);
    for (let i = 0; i < 5; i++) {
      // held past its turn, this would wait for ever (the test would time out)
      await expect(redis.set(`${prefix}alone`, String(i))).resolves.toBe("OK");
      await new Promise((r) => setImmediate(r));
    }
    expect(await redis.get(`${prefix}alone`)).toBe("4");
  });

  it("leaves MULTI and pipelines as ioredis sends them, among commands of the same turn", async () => {
    const redis = await connection(true);
    const [before, multi, pipeline, after] = await Promise.all([
      redis.set(`${prefix}a`, "1"),
      redis.multi().incr(`${prefix}a`).incr(`${prefix}a`).exec(),
      redis.pipeline().incr(`${prefix}b`).get(`${prefix}a`).exec(),
      redis.get(`${prefix}a`),
    ]);
    expect(before).toBe("OK");
    expect(multi).toEqual([
      [null, 2],
      [null, 3],
    ]);
    expect(pipeline).toEqual([
      [null, 1],
      [null, "3"],
    ]);
    expect(after).toBe("3");
  });

  it("keeps working on the socket of a new connection after a reconnect", async () => {
    const redis = await connection(true);
    await redis.set(`${prefix}r`, "before");
    const first = redis.stream;
    redis.disconnect(true);
    await new Promise<void>((resolve) => redis.once("ready", () => resolve()));
    expect(redis.stream).not.toBe(first);
    const { writes, result } = await writesDuring(redis, () => Promise.all([redis.get(`${prefix}r`), redis.set(`${prefix}r`, "after"), redis.get(`${prefix}r`)]));
    expect(result).toEqual(["before", "OK", "after"]);
    expect(writes).toBe(1);
  });
});
