import { openRuntime, type Runtime } from "@/lib/server/runtime";

/**
 * Opens the runtime for one command and closes it however the command ends. Opening applies
 * pending migrations; with the embedded database it fails with DataDirLockedError while a server
 * holds the data directory, which the CLI reports as one line.
 */
export async function withRuntime<T>(fn: (runtime: Runtime) => Promise<T>): Promise<T> {
  const runtime = await openRuntime();
  try {
    return await fn(runtime);
  } finally {
    await runtime.close();
  }
}
