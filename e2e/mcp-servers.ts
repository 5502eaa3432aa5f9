import { UPSTREAM_PORTS } from "./upstream";

/**
 * The MCP servers the e2e servers guard (IDEMGATE_MCP_SERVERS): `counter`, the SDK test server
 * (test/support/mcp-test-server.ts) that Idemgate starts itself over stdio, with a write, a
 * `readOnlyHint` read and an `idempotentHint` tool; and `offline`, a Streamable HTTP server nobody
 * listens for (the port beside the embedded configuration's service, e2e/upstream.ts), which the status page shows as down.
 */
/** where `offline` would be: the port beside the upstream service's */
export const OFFLINE_MCP_URL = `http://127.0.0.1:${UPSTREAM_PORTS.embedded + 1}/mcp`;

export const MCP_SERVERS = JSON.stringify([
  { name: "counter", command: process.execPath, args: ["--import", "tsx", "test/support/mcp-test-server.ts", "--stdio"], timeoutMs: 5_000 },
  { name: "offline", url: OFFLINE_MCP_URL, timeoutMs: 2_000 },
]);
