import { afterEach, describe, expect, it } from "vitest";
import { RedisProcess } from "@/test/support/redis-process";
import { listening } from "@/scripts/test-ports.mjs";

// The fault suites' own redis-server (test/support/redis-process.ts): whatever a test starts, its
// dispose() leaves nothing listening (a second start() while it ran once left a server behind).

describe("RedisProcess", () => {
  let redis: RedisProcess | undefined;
  afterEach(async () => {
    await redis?.dispose();
  });

  it("a start while it runs keeps the one server, and dispose stops it", async () => {
    redis = await RedisProcess.startOnFreePort();
    await redis.start();
    expect(await listening(redis.port)).toBe(true);
    await redis.dispose();
    expect(await listening(redis.port)).toBe(false);
  });

  it("a stop then a start is a new server on the same port, which dispose stops", async () => {
    redis = await RedisProcess.startOnFreePort();
    await redis.flushAll();
    await redis.stop();
    expect(await listening(redis.port)).toBe(false);
    await redis.start();
    expect(await listening(redis.port)).toBe(true);
    await redis.dispose();
    expect(await listening(redis.port)).toBe(false);
  });
});
