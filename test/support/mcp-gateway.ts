import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import * as route from "@/app/mcp/route";
import { createApiToken } from "@/lib/auth/api-tokens";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { demoTools } from "@/lib/tools/demo";
import { ToolRegistry } from "@/lib/tools/registry";
import { createTestPostgres, type TestPostgres } from "./databases";
import { installTestRuntime } from "./runtime";

export interface McpGateway {
  pg: TestPostgres;
  runtime: Runtime;
  /** http://127.0.0.1:<port>/mcp */
  url: string;
  /** a new API token for `scope` */
  token(scope: string): Promise<string>;
  close(): Promise<void>;
}

/**
 * Idemgate's /mcp route (app/mcp/route.ts) behind a node:http server, as Next.js serves it, over a
 * real runtime: a fresh PostgreSQL database for the key store (SQL) and the audit log, the demo
 * tools. The runtime is the one `getRuntime()` answers while it is open.
 */
export async function startMcpGateway(label: string): Promise<McpGateway> {
  const pg = await createTestPostgres(label);
  const runtime = installTestRuntime({ db: pg.db, store: new SqlKeyStore(pg.db), registry: new ToolRegistry(demoTools) });
  let url = "";
  const http: HttpServer = createServer((req, res) => {
    serveRoute(req, res, url).catch((err) => {
      console.error(err);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
  return {
    pg,
    runtime,
    url,
    async token(scope) {
      // `actor` is recorded in the operator audit trail where token creation is audited
      const input = { scope, label: "MCP tests", actor: "test" };
      return (await createApiToken(pg.db.prisma, input)).token;
    },
    async close() {
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
      await runtime.close();
      await pg.drop();
    },
  };
}

/** The official SDK client, connected to `url` over Streamable HTTP with an API token. */
export async function connectClient(url: string, token: string): Promise<Client> {
  const client = new Client({ name: "idemgate-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

/** node:http → the route's Fetch handlers. */
async function serveRoute(req: IncomingMessage, res: ServerResponse, base: string): Promise<void> {
  const url = new URL(req.url ?? "/", base);
  const handler = url.pathname === "/mcp" ? route[req.method as "POST" | "GET" | "DELETE"] : undefined;
  if (!handler) {
    res.writeHead(404).end();
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const headers = new Headers();
  for (const [name, values] of Object.entries(req.headersDistinct)) for (const value of values ?? []) headers.append(name, value);
  const response = await handler(new Request(url, { method: req.method, headers, body: req.method === "POST" ? Buffer.concat(chunks) : undefined }));
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
}
