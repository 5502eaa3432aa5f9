import net from "node:net";

/**
 * A TCP forwarder on loopback whose connections the test can cut, to make a server (PostgreSQL,
 * Redis) unreachable on demand without stopping it: cut() drops every connection and stops
 * listening (new connections are refused), open() listens again on the same port.
 */
export class CuttableProxy {
  private server: net.Server | null = null;
  private sockets = new Set<net.Socket>();

  /** port 0: a free port, chosen at the first open() and kept after */
  constructor(
    public port: number,
    readonly target: number,
  ) {}

  async open(): Promise<void> {
    if (this.server) return;
    const server = net.createServer((client) => {
      const upstream = net.connect(this.target, "127.0.0.1");
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => {});
      }
      client.pipe(upstream).pipe(client);
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.port = (server.address() as net.AddressInfo).port;
  }

  async cut(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise((r) => server.close(r));
  }

  /** `url` with its port replaced by this proxy's */
  through(url: string): string {
    const u = new URL(url);
    u.port = String(this.port);
    return u.toString();
  }
}
