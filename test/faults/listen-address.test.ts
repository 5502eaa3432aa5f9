import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { testPort } from "@/scripts/test-ports.mjs";
import { removeDataDir, startServer, type RunningServer } from "@/test/support/server";

// HOST chooses the address `npm start` (scripts/serve.mjs) listens on. Real servers from the
// production build, on the embedded database. Ports 3160–3161 are this file's (moved by IDEMGATE_TEST_PORT_BASE).

/** Whether something accepts TCP connections at host:port. */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.setTimeout(2_000);
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
    socket.once("timeout", () => {
      socket.destroy();
      resolve(false);
    });
  });
}

describe("the listen address", () => {
  let server: RunningServer | null = null;
  afterEach(async () => {
    await server?.stop();
    server = null;
  });

  it("HOST=127.0.0.2: answers there and nowhere else on this machine", async () => {
    const port = testPort(3160);
    const dataDir = `.data/fault-host-${port}`;
    await removeDataDir(dataDir);
    server = await startServer({ port, dataDir, host: "127.0.0.2", hostFrom: "env" });
    expect(server.output()).toContain(`serving on http://127.0.0.2:${port}`);
    expect((await fetch(`http://127.0.0.2:${port}/api/health`)).status).toBe(200);
    expect(await accepts("127.0.0.2", port)).toBe(true);
    expect(await accepts("127.0.0.1", port)).toBe(false);
    expect(await accepts("::1", port)).toBe(false);
  }, 120_000);

  it("HOST unset: every interface, as before (127.0.0.1 and 127.0.0.2 both answer)", async () => {
    const port = testPort(3161);
    const dataDir = `.data/fault-host-${port}`;
    await removeDataDir(dataDir);
    server = await startServer({ port, dataDir, host: "127.0.0.1", hostFrom: "env", env: { HOST: "" } });
    expect(server.output()).toContain("every interface; set HOST to choose one");
    expect((await fetch(`http://127.0.0.1:${port}/api/health`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.2:${port}/api/health`)).status).toBe(200);
  }, 120_000);
});
