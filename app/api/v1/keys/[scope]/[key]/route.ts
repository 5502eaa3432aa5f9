import { visibleScope, withPrincipal } from "@/lib/http/guard";
import { getKeyDetail } from "@/lib/keys/get-key-detail";
import { presentKey } from "@/lib/keys/present-key";

export const dynamic = "force-dynamic";

type Params = { scope: string; key: string };

// GET /api/v1/keys/{scope}/{key} – the record with its result, and the key's audit timeline
export const GET = withPrincipal<Params>("read", async (_request, { params, principal, runtime }) => {
  const scope = visibleScope(principal, decodeURIComponent(params.scope))!;
  const detail = await getKeyDetail(runtime, scope, decodeURIComponent(params.key));
  return Response.json({ ...detail, record: detail.record ? presentKey(detail.record, Date.now(), true) : null });
});
