import { Client, StreamableHTTPClientTransport, type VersionNegotiationMode } from "@modelcontextprotocol/client";
import { StdioClientTransport, type StdioServerParameters } from "@modelcontextprotocol/client/stdio";

/**
 * The two protocol revisions /mcp serves, each as the official v2 client reaches it:
 * - 2026-07-28: `versionNegotiation: { mode: "auto" }`, what a current client does: it probes with
 *   `server/discover` and would fall back to `initialize` on a server that does not answer it, so a
 *   test asserts the revision it landed on rather than trusting the mode;
 * - 2025-11-25: the client's default (`mode: "legacy"`), the plain `initialize` handshake of a 2025 client.
 */
export const REVISIONS = [
  { revision: "2026-07-28", mode: "auto" },
  { revision: "2025-11-25", mode: "legacy" },
] as const satisfies readonly { revision: string; mode: VersionNegotiationMode }[];

export type McpRevision = (typeof REVISIONS)[number]["revision"];

function newClient(revision: McpRevision, name: string): Client {
  const { mode } = REVISIONS.find((r) => r.revision === revision)!;
  return new Client({ name, version: "1.0.0" }, { versionNegotiation: { mode } });
}

/** The v2 client on `revision`, connected to `url` (an /mcp endpoint) over Streamable HTTP with an API token. */
export async function connectOnRevision(url: string, token: string, revision: McpRevision, name = "idemgate-test"): Promise<Client> {
  const client = newClient(revision, name);
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

/** The v2 client on `revision`, connected to a process it starts (e.g. the stdio bridge). */
export async function connectStdioOnRevision(server: StdioServerParameters, revision: McpRevision, name = "idemgate-test-stdio"): Promise<Client> {
  const client = newClient(revision, name);
  await client.connect(new StdioClientTransport(server));
  return client;
}
