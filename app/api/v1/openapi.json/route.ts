import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";

// GET /api/v1/openapi.json – OpenAPI 3.1, generated from the served tools' schemas (rendered once per
// tool set: a reload or an MCP server's changed list makes a new registry); public like any API reference
export async function GET(request: Request): Promise<Response> {
  const { registry } = await getRuntime();
  return new Response(registry.openApiJson(new URL(request.url).origin), { headers: { "content-type": "application/json" } });
}
