import { visibleScope, withPrincipal } from "@/lib/auth/guard";
import { search } from "@/lib/operator/search";

export const dynamic = "force-dynamic";

// GET /api/v1/search?q= – keys by name or prefix, executions by id or argument value, or tool:… state:… scope:…
export const GET = withPrincipal("read", async (request, { principal, runtime }) => {
  const q = new URL(request.url).searchParams.get("q");
  const scope = principal.kind === "token" ? visibleScope(principal, undefined) : undefined;
  return Response.json(await search(runtime, q, { scope, audience: principal.kind === "token" ? "tenant" : "operator" }));
});
