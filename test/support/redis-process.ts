import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import net, { type AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { Redis } from "ioredis";

/** A loopback port nothing listened on a moment ago. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** A redis-server of the test's own on a loopback port, which the test may stop, restart or flush. */
export class RedisProcess {
  private child: ChildProcess | null = null;
  private dir: string | null = null;
  /** whether the running child answered a PING */
  private answered = false;

  constructor(readonly port: number) {}

  /**
   * A started redis-server on a port the system just handed out (another test or checkout may have
   * taken it in between: then another port, a few times).
   */
  static async startOnFreePort(): Promise<RedisProcess> {
    for (let attempt = 1; ; attempt++) {
      const redis = new RedisProcess(await freePort());
      try {
        await redis.start();
        return redis;
      } catch (err) {
        await redis.dispose();
        if (attempt >= 5) throw err;
      }
    }
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /**
   * Starts it and waits until it answers; does nothing while a server it started and saw answer
   * still runs (a second redis-server on the port would fail to bind, and the one running would be
   * left behind). One that never answered is stopped first.
   */
  async start(): Promise<void> {
    if (this.answered && this.child && this.child.exitCode === null && this.child.signalCode === null) return;
    await this.stop();
    this.dir ??= await mkdtemp(path.join(os.tmpdir(), "idemgate-redis-"));
    const child = spawn("redis-server", ["--port", String(this.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", this.dir], {
      stdio: "ignore",
    });
    this.child = child;
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`redis-server on ${this.port} exited with ${child.exitCode}`);
      const probe = new Redis(this.url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      probe.on("error", () => {});
      try {
        await probe.connect();
        if ((await probe.ping()) === "PONG") {
          this.answered = true;
          return;
        }
      } catch {
        // not up yet
      } finally {
        probe.disconnect();
      }
      if (Date.now() > deadline) throw new Error(`redis-server on ${this.port} did not start`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** SIGKILL: the data is gone with it (no persistence), like a crashed cache node */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    this.answered = false;
    if (!child || child.exitCode !== null) return;
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
  }

  async flushAll(): Promise<void> {
    const client = new Redis(this.url, { maxRetriesPerRequest: 1 });
    try {
      await client.flushall();
    } finally {
      client.disconnect();
    }
  }

  async dispose(): Promise<void> {
    await this.stop();
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }
}
