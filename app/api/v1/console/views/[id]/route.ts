import { operatorOf, withPrincipal } from "@/lib/auth/guard";
import { deleteSavedView, updateSavedView } from "@/lib/console/saved-views";
import { readJsonBody } from "@/lib/http/read-body";

export const dynamic = "force-dynamic";

// PATCH /api/v1/console/views/{id} – { name?, query? }: rename one of the signed-in operator's views or replace its filter
export const PATCH = withPrincipal<{ id: string }>("save_views", async (request, { params, principal, runtime }) =>
  Response.json(await updateSavedView(runtime.db.prisma, operatorOf(principal).id, params.id, await readJsonBody(request, 16 * 1024)), { headers: { "Cache-Control": "no-store" } }),
);

// DELETE /api/v1/console/views/{id} – delete one of the signed-in operator's views
export const DELETE = withPrincipal<{ id: string }>("save_views", async (_request, { params, principal, runtime }) => {
  await deleteSavedView(runtime.db.prisma, operatorOf(principal).id, params.id);
  return Response.json({ deleted: true }, { headers: { "Cache-Control": "no-store" } });
});
