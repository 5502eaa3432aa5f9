import { visibleScope, withPrincipal } from "@/lib/auth/guard";
import { getRun } from "@/lib/console/get-run";

export const dynamic = "force-dynamic";

// GET /api/v1/runs/{session}?scope=&cursor=&limit= – a run's calls (executions and suppressions of one Idemgate-Session) in time order, a page at a time
export const GET = withPrincipal<{ session: string }>("read", async (request, { params, principal, runtime }) => {
  const query = new URL(request.url).searchParams;
  const scope = visibleScope(principal, query.get("scope"));
  return Response.json(
    await getRun(runtime, { session: params.session, scope: scope ?? null, cursor: query.get("cursor"), limit: query.get("limit"), audience: principal.kind === "token" ? "tenant" : "operator" }),
  );
});
