import { operatorOf, withPrincipal } from "@/lib/auth/guard";
import { createSavedView, listSavedViews, listViewsQuery } from "@/lib/console/saved-views";
import { parseQuery } from "@/lib/http/parse-body";
import { readJsonBody } from "@/lib/http/read-body";

export const dynamic = "force-dynamic";

const noStore = { "Cache-Control": "no-store" };

// GET /api/v1/console/views?page=keys|anomalies – the signed-in operator's saved views of that page
export const GET = withPrincipal("save_views", async (request, { principal, runtime }) => {
  const { page } = parseQuery(request, listViewsQuery);
  return Response.json({ views: await listSavedViews(runtime.db.prisma, operatorOf(principal).id, page) }, { headers: noStore });
});

// POST /api/v1/console/views – { page, name, query }: a new saved view of the signed-in operator's
export const POST = withPrincipal("save_views", async (request, { principal, runtime }) => {
  const view = await createSavedView(runtime.db.prisma, operatorOf(principal).id, await readJsonBody(request, 16 * 1024));
  return Response.json(view, { status: 201, headers: noStore });
});
