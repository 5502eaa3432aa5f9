import { visibleScope, withPrincipal } from "@/lib/auth/guard";
import { getKeyDetail } from "@/lib/operator/get-key-detail";
import { presentKeyDetail, presentKeyDetailForTenant } from "@/lib/operator/present-key-detail";

export const dynamic = "force-dynamic";

type Params = { scope: string; key: string };

// GET /api/v1/keys/{scope}/{key} – the record with its result, whether its tool can be probed, and the key's audit timeline
// (for an API token without who did an operator action and why)
// (the segments arrive decoded: a key holding "%41" is that key, not "A")
export const GET = withPrincipal<Params>("read", async (_request, { params, principal, runtime }) => {
  const scope = visibleScope(principal, params.scope)!;
  const detail = await getKeyDetail(runtime, scope, params.key);
  // a tenant's token does not see operators' emails and reasons, nor exception messages
  return Response.json(principal.kind === "token" ? presentKeyDetailForTenant(detail) : presentKeyDetail(detail));
});
