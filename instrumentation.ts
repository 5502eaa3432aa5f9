/**
 * Runs once when the server starts (`next start`, `next dev`), before the first request is answered,
 * and never during `next build`. This file is also compiled for the Edge runtime, so everything
 * Node-specific lives in lib/process/start-server.ts and is imported only in the Node.js runtime.
 */
export async function register() {
  if (process.env.NEXT_RUNTIME === "nodejs") {
    const { startServer } = await import("@/lib/process/start-server");
    await startServer();
  }
}
