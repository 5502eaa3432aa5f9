import { getRegistry } from "@/lib/tools";

export const dynamic = "force-dynamic";

// GET /api/v1/openapi.json – OpenAPI 3.1, generated from the tools' schemas; public like any API reference
export function GET(request: Request): Response {
  return Response.json(getRegistry().openApiDocument(new URL(request.url).origin));
}
