import { spawn, type ChildProcess } from "node:child_process";
import { readFile } from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { bundledScript } from "./bundled-script";

const ROOT = path.resolve(import.meta.dirname, "../..");

/** Which test server: built with the 1.x SDK (2025-11-25, stateful sessions) or the v2 SDK (2026-07-28 too). */
export type McpTestServerSdk = "v1" | "v2";

const SCRIPTS: Record<McpTestServerSdk, string> = { v1: "test/support/mcp-test-server.ts", v2: "test/support/mcp-v2-test-server.ts" };

/**
 * test/support/mcp-test-server.ts (or, with `sdk: "v2"`, mcp-v2-test-server.ts) over Streamable
 * HTTP as a process of its own, on a port that stays the same across stop() and start(): a
 * restarted server is the same URL with none of its sessions (the v2 server keeps none anyway).
 * Its side effects go to `effectsFile`, which outlives the process.
 */
export class McpTestServerProcess {
  private child: ChildProcess | null = null;

  constructor(
    readonly port: number,
    readonly effectsFile: string,
    readonly sdk: McpTestServerSdk = "v1",
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}/mcp`;
  }

  async start(): Promise<void> {
    const child = spawn(process.execPath, [await bundledScript(SCRIPTS[this.sdk]), "--http", String(this.port)], {
      cwd: ROOT,
      env: { ...process.env, EFFECTS_FILE: this.effectsFile },
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      child.stderr!.on("data", (chunk) => String(chunk).includes("listening") && resolve());
      child.once("exit", (code) => reject(new Error(`the test MCP server exited with ${code}`)));
    });
  }

  /** Kills the process (SIGKILL: no goodbye to its clients) and waits until the port is closed. */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
  }

  /** How many times the server recorded exactly `line` (e.g. `increment:<label>`). */
  async effects(line: string): Promise<number> {
    const text = await readFile(this.effectsFile, "utf8").catch(() => "");
    return text.split("\n").filter((l) => l === line).length;
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
    probe.on("error", reject);
  });
}
