import { visibleScope, withPrincipal } from "@/lib/http/guard";
import { getKeyDetail } from "@/lib/keys/get-key-detail";
import { presentKeyDetail } from "@/lib/keys/present-key-detail";

export const dynamic = "force-dynamic";

type Params = { scope: string; key: string };

// GET /api/v1/keys/{scope}/{key} – the record with its result, whether its tool can be probed, and the key's audit timeline
export const GET = withPrincipal<Params>("read", async (_request, { params, principal, runtime }) => {
  const scope = visibleScope(principal, decodeURIComponent(params.scope))!;
  return Response.json(presentKeyDetail(await getKeyDetail(runtime, scope, decodeURIComponent(params.key))));
});
