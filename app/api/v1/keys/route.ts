import { visibleScope, withPrincipal } from "@/lib/auth/guard";
import { parseQuery } from "@/lib/http/parse-body";
import { KeyListQuery, listKeys } from "@/lib/operator/list-keys";

export const dynamic = "force-dynamic";

// GET /api/v1/keys – keys newest first, filtered by state, tool, scope and key prefix, with a cursor
export const GET = withPrincipal("read", async (request, { principal, runtime }) => {
  const query = parseQuery(request, KeyListQuery);
  // a tenant's token reads unknown keys' notes without exception messages
  return Response.json(await listKeys(runtime, { ...query, scope: visibleScope(principal, query.scope) }, principal.kind === "token" ? "tenant" : "operator"));
});
