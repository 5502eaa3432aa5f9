import os from "node:os";
import { localUrl, publishServerAccess } from "@/lib/auth/cli-access";
import { keyStoreLocation } from "@/lib/process/health";
import { describeConfigError, ServedTools, toolConfigStatus } from "@/lib/process/served-tools";
import type { Runtime } from "@/lib/server/runtime";

/** a hung store must not keep a stopping server alive */
const CLOSE_TIMEOUT_MS = 5_000;

/**
 * Server start-up, called from instrumentation.ts: opens the database (applying migrations) and the
 * key store, and seeds an empty database. On failure the process exits with a readable message:
 * Next would otherwise keep running and answer every request with 500.
 */
export async function startServer(): Promise<void> {
  const startedMs = Date.now();
  try {
    // the tools first: a configuration file with an error refuses the start before anything is opened
    const { getRegistry } = await import("@/lib/tools");
    const served = new ServedTools({ builtIn: getRegistry().list() });
    const { getRuntime } = await import("@/lib/server/runtime");
    const { seedIfEmpty } = await import("@/lib/process/seed");
    const runtime = await getRuntime();
    const { startBackgroundJobs } = await import("@/lib/process/background");
    const seeded = await seedIfEmpty(runtime);

    // Demo traffic on the first start of the embedded default only: never into a real database, and
    // only through the demo tools (IDEMGATE_DEMO_TOOLS=0 turns them off).
    if (seeded.created && !runtime.config.databaseUrl && process.env.IDEMGATE_DEMO_TRAFFIC !== "0") {
      if (runtime.config.demoTools) {
        const { seedDemoTraffic } = await import("@/lib/process/demo-traffic");
        console.log(`idemgate: seeded ${await seedDemoTraffic(runtime)} demo calls (set IDEMGATE_DEMO_TRAFFIC=0 to start empty)`);
      } else {
        console.log("idemgate: the demo tools are off (IDEMGATE_DEMO_TOOLS=0), so no demo calls were seeded");
      }
    }
    const stopJobs = startBackgroundJobs(runtime);
    const { registerFastInvoke } = await import("@/lib/gateway/fast-invoke");
    registerFastInvoke();
    // the configuration file's tools, and those of other MCP servers (IDEMGATE_MCP_SERVERS, the
    // file's mcpServers), served beside the built-in ones
    await served.start(runtime);
    const config = toolConfigStatus();
    if (config) {
      console.log(`idemgate: tools from ${config.file}: ${config.tools} tools, ${config.mcpServers} MCP servers (SIGHUP reloads it)`);
      process.on("SIGHUP", () => void served.reload());
    }
    const unpublish = publishForCommandLine(runtime);
    closeOnShutdown(async () => {
      await unpublish();
      stopJobs();
      await served.close();
      await runtime.close();
    });
    console.log(readyLine(runtime, Date.now() - startedMs));
    if (seeded.created && seeded.credentials) {
      console.log(`\n${seeded.credentials.trimEnd()}\n(also written to ${runtime.config.dataDir}/credentials.txt)\n`);
    }
  } catch (err) {
    const message = describeConfigError(err);
    console.error(`\nidemgate: could not start: ${message}\n`);
    if (process.env.IDEMGATE_DEBUG && err instanceof Error) console.error(err.stack);
    process.exit(1);
  }
}

/**
 * On the embedded database, which only this process may open, the command line reaches the database
 * through this server: once it has started and `scripts/serve.mjs` listens (in either order), its
 * address and a credential for the CLI go into `<dataDir>/server.json` (lib/auth/cli-access.ts).
 * Returns what takes them down at shutdown.
 */
function publishForCommandLine(runtime: Runtime): () => Promise<void> {
  if (runtime.db.kind !== "pglite") return async () => {};
  let unpublish: (() => Promise<void>) | null = null;
  const hook = globalThis as unknown as { __idemgateAddress?: unknown; __idemgateListening?: (address: unknown) => void };
  const publish = (address: unknown) => {
    if (!address || typeof address !== "object" || unpublish) return;
    publishServerAccess(runtime.config.dataDir, localUrl(address as { address: string; family: string; port: number })).then(
      (done) => (unpublish = done),
      (err) => console.error(`idemgate: the command line cannot reach this server: ${err instanceof Error ? err.message : String(err)}`),
    );
  };
  hook.__idemgateListening = publish;
  if (hook.__idemgateAddress) publish(hook.__idemgateAddress);
  return async () => {
    await unpublish?.().catch(() => {});
  };
}

/**
 * The start-up log's summary. Locations are redacted as on /status (no user info, no query string),
 * so no password reaches the log, whichever part of the URL it was given in.
 */
export function readyLine(runtime: Runtime, readyMs: number): string {
  return (
    `idemgate: key store ${runtime.store.kind} (${keyStoreLocation(runtime)}), audit database ${runtime.db.kind} (${runtime.db.location}), ` +
    `audit mode ${runtime.config.auditMode}; ready in ${readyMs} ms`
  );
}

/**
 * Closing the runtime on shutdown flushes queued audit rows and releases the embedded database's lock
 * instead of leaving both to crash recovery. The order matters: in-flight tool calls must finish
 * first. Next handles SIGINT/SIGTERM by draining its HTTP server and then calling process.exit, with
 * no hook in between; so after a signal, process.exit is wrapped to close the runtime before exiting.
 * With NEXT_MANUAL_SIG_HANDLE set, Next leaves the signals to us: close and exit directly.
 */
function closeOnShutdown(close: () => Promise<void>): void {
  const exit = process.exit.bind(process);
  let closing: Promise<void> | null = null;
  const closeThenExit = (code?: number | string | null) => {
    if (closing) return;
    setTimeout(() => exit(code), CLOSE_TIMEOUT_MS).unref();
    closing = close()
      .catch((err) => console.error("idemgate: error while closing:", err))
      .finally(() => exit(code));
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (process.env.NEXT_MANUAL_SIG_HANDLE) closeThenExit(128 + (os.constants.signals[signal] ?? 0));
    else process.exit = closeThenExit as typeof process.exit;
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
}
