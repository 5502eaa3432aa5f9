import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { applyConnectionLimits } from "../scripts/connection-limits.mjs";

// The production server's watch over request bodies (scripts/connection-limits.mjs), on a real
// node:http server and client.
describe("the body watch of the production server", () => {
  let server: http.Server | undefined;
  afterEach(async () => {
    await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
    server = undefined;
  });

  it("stops watching a request as soon as its body has arrived, not at its next sweep", async () => {
    const seen: { whileArriving: number; onceArrived: number }[] = [];
    const s = http.createServer();
    server = s;
    const admit = applyConnectionLimits(s, { bodyIdleTimeoutMs: 3_600_000, requestTimeoutMs: 3_600_000, maxConnections: 10 });
    s.on("request", (req, res) => {
      if (!admit(req, res)) return;
      const whileArriving = admit.watching();
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        // the watch's own "end" listener ran first: it was added when the request was admitted
        seen.push({ whileArriving, onceArrived: admit.watching() });
        res.end(Buffer.concat(chunks));
      });
    });
    await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
    const { port } = s.address() as AddressInfo;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      for (let i = 0; i < 3; i++) {
        const echoed = await new Promise<string>((resolve, reject) => {
          const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/", agent }, (res) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (c: string) => (text += c));
            res.on("end", () => resolve(text));
          });
          req.on("error", reject);
          req.end(`body ${i}`);
        });
        expect(echoed).toBe(`body ${i}`);
      }
    } finally {
      agent.destroy();
    }
    expect(seen).toEqual([
      { whileArriving: 1, onceArrived: 0 },
      { whileArriving: 1, onceArrived: 0 },
      { whileArriving: 1, onceArrived: 0 },
    ]);
    expect(admit.watching()).toBe(0);
  });
});
