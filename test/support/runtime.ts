import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { loadConfig } from "@/lib/server/config";
import type { Database } from "@/lib/db/database";
import { Engine } from "@/lib/idempotency/engine";
import { PausedTools } from "@/lib/idempotency/paused-tools";
import { readPausedTools } from "@/lib/audit/paused-tools-table";
import type { Runtime } from "@/lib/server/runtime";
import type { KeyStore } from "@/lib/idempotency/key-store";
import type { ToolRegistry } from "@/lib/tools/registry";

const holder = globalThis as unknown as { __idemgateRuntime?: Promise<Runtime> };

/**
 * A real runtime over the given database, key store and tools, installed as the one
 * `getRuntime()` answers, so route handlers and the gateway's fast path run against it in-process.
 * `close()` writes the audit queue, closes the store and uninstalls it; the database stays the
 * caller's.
 */
export function installTestRuntime(parts: { db: Database; store: KeyStore; registry: ToolRegistry }): Runtime {
  const audit = new PrismaAuditWriter(parts.db.prisma, { execute: parts.db.execute });
  const runtime: Runtime = {
    config: loadConfig({} as NodeJS.ProcessEnv),
    db: parts.db,
    store: parts.store,
    audit,
    // paused tools are read when a pause or resume through this runtime asks (no timer)
    engine: new Engine({ store: parts.store, audit, pausedTools: new PausedTools(() => readPausedTools(parts.db)) }),
    registry: parts.registry,
    async close() {
      if (holder.__idemgateRuntime === installed) holder.__idemgateRuntime = undefined;
      await audit.close();
      await parts.store.close();
    },
  };
  const installed = Promise.resolve(runtime);
  holder.__idemgateRuntime = installed;
  return runtime;
}

/** Calls `tool` through the runtime's engine as the gateway would: its arguments parsed, under `scope` and `key`. */
export function invokeTool(runtime: Runtime, scope: string, tool: string, key: string, args: unknown) {
  const t = runtime.registry.get(tool);
  return runtime.engine.invoke(t, runtime.registry.runnerFor(t, runtime.db.prisma), { scope, key, args: runtime.registry.parseArgs(t, args) });
}
