import { handleMcpRequest } from "@/lib/mcp/server";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";

// /mcp – Idemgate as an MCP server (Streamable HTTP, stateless): tools/list and tools/call with
// the gateway's API tokens, keys and audit (lib/mcp/server.ts)
const handle = (request: Request) => handleMcpRequest(request, getRuntime);

export const POST = handle;
export const GET = handle;
export const DELETE = handle;
