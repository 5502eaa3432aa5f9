import http from "node:http";
import type { AddressInfo } from "node:net";

export interface BearerProxy {
  /** where to point a client that cannot send a token: http://127.0.0.1:<port> */
  url: string;
  /** how many requests it forwarded */
  forwarded(): number;
  close(): Promise<void>;
}

/**
 * An HTTP forwarder on loopback for tests only: every request goes to `target` as it came (method,
 * path, headers including Host and Origin, body streamed both ways), with `Authorization: Bearer
 * <token>` set, for a client that has no way to send one (a conformance runner, a probe).
 */
export async function startBearerProxy(target: string, token: string): Promise<BearerProxy> {
  const upstream = new URL(target);
  let count = 0;
  const server = http.createServer((req, res) => {
    count++;
    const headers = { ...req.headers, authorization: `Bearer ${token}` };
    const out = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on("error", (err) => {
      if (!res.headersSent) res.writeHead(502, { "Content-Type": "text/plain" });
      res.end(`bearer proxy: ${err.message}`);
    });
    // a client that goes away ends the forwarded request too (an event stream is not left open)
    res.on("close", () => out.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    forwarded: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
