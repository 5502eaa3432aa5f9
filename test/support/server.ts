import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { cp, readFile, rm } from "node:fs/promises";
import path from "node:path";

const ROOT = path.resolve(import.meta.dirname, "../..");

export interface RunningServer {
  url: string;
  port: number;
  dataDir: string;
  /** what it printed, for failure messages */
  output: () => string;
  /** the demo API token and operator credentials its first start seeded */
  credentials(): Promise<{ apiToken: string; email: string; password: string }>;
  /** SIGKILL to the whole process group: a crash, nothing flushed or closed */
  kill(): Promise<void>;
  /** SIGTERM and wait */
  stop(): Promise<void>;
  /** a signal to the server process alone (not its group: the MCP servers it started over stdio are in it), e.g. SIGHUP */
  signal(signal: NodeJS.Signals): void;
  /** resolves when the server process has exited by itself or been stopped: its exit code, or its signal's name */
  exited(): Promise<number | NodeJS.Signals | null>;
}

export interface ServerOptions {
  port: number;
  dataDir: string;
  env?: Record<string, string>;
  /** the path polled until the server answers (default /api/health; a degraded server answers 503 there) */
  readyPath?: string;
  readyStatuses?: number[];
  /** the address it listens on and is asked at (default 127.0.0.1) */
  host?: string;
  /** how the address is given: `-H` (default) or the HOST variable, as `npm start` passes it */
  hostFrom?: "flag" | "env";
  /** the umask the server starts with (default: this process's), set by a shell that then execs it */
  umask?: number;
}

let migratedEmbedded: string | undefined;

/**
 * Gives first starts a copy of an embedded database the run migrated once (test/support/fault-setup.ts
 * passes the one test/support/global-setup.ts made): applying every migration to an empty PGlite is
 * seconds of CPU per server, and the fault suite starts dozens. Restarts find their own database; the e2e
 * embedded server, which does not use this, still starts from nothing as a newcomer's `npm start` does.
 */
export function useMigratedEmbeddedDatabase(dir: string | undefined): void {
  migratedEmbedded = dir;
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once("exit", () => r()));
}

/**
 * A production server (`scripts/serve.mjs`, as `npm start` runs it; needs a build) in a process group of its own, so a kill takes
 * the whole server down at once, as a crash would. The demo tools are on (IDEMGATE_DEMO_TOOLS=1), with DATABASE_URL too.
 */
export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const serve = path.join(ROOT, "scripts", "serve.mjs");
  const host = options.host ?? "127.0.0.1";
  const hostArgs = options.hostFrom === "env" ? [] : ["-H", host];
  const hostEnv = options.hostFrom === "env" ? { HOST: host } : {};
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${options.port}`;
  // a server left running on the port would answer the readiness poll in place of this one
  const occupied = await fetch(url + "/api/health", { signal: AbortSignal.timeout(1_000) }).then(
    () => true,
    () => false,
  );
  if (occupied) throw new Error(`port ${options.port} is already served by another process: stop it before starting a server there`);
  // an embedded server's first start (no database in its data directory yet) from the run's migrated one
  const database = path.resolve(ROOT, options.dataDir, "pglite");
  if (!options.env?.DATABASE_URL && migratedEmbedded && !existsSync(database)) await cp(migratedEmbedded, database, { recursive: true });
  const args = [serve, "-p", String(options.port), ...hostArgs];
  const [command, argv] =
    options.umask === undefined ? [process.execPath, args] : ["/bin/sh", ["-c", `umask ${options.umask.toString(8).padStart(3, "0")} && exec "$0" "$@"`, process.execPath, ...args]];
  const child = spawn(command, argv, {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1", IDEMGATE_DATA_DIR: options.dataDir, REDIS_URL: "", DATABASE_URL: "", IDEMGATE_DEMO_TRAFFIC: "0", IDEMGATE_DEMO_TOOLS: "1", ...hostEnv, ...options.env },
  });
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const ready = options.readyStatuses ?? [200];
  // a bound, not a wait: on two cores under the whole suite a first start has taken 75 s
  const deadline = Date.now() + 150_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the server on ${options.port} exited with ${child.exitCode}:\n${output}`);
    try {
      const res = await fetch(url + (options.readyPath ?? "/api/health"), { signal: AbortSignal.timeout(3_000) });
      if (ready.includes(res.status)) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      process.kill(-child.pid!, "SIGKILL");
      throw new Error(`the server on ${options.port} did not become ready:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  const signalGroup = async (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // already gone
    }
    await exited(child);
  };
  return {
    url,
    port: options.port,
    dataDir: options.dataDir,
    output: () => output,
    async credentials() {
      const text = await readFile(path.resolve(ROOT, options.dataDir, "credentials.txt"), "utf8");
      const field = (label: string) => new RegExp(`${label}:\\s+(\\S+)`).exec(text)?.[1] ?? "";
      return { apiToken: field("API token"), email: field("operator"), password: field("password") };
    },
    kill: () => signalGroup("SIGKILL"),
    stop: () => signalGroup("SIGTERM"),
    signal: (signal) => void process.kill(child.pid!, signal),
    exited: () => exited(child).then(() => child.exitCode ?? child.signalCode),
  };
}

export async function removeDataDir(dataDir: string): Promise<void> {
  await rm(path.resolve(ROOT, dataDir), { recursive: true, force: true });
}

export { ROOT };
