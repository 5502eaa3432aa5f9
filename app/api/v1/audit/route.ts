import { auditTrailQuerySchema } from "@/lib/audit/audit-trail-filters";
import { listOperatorActions } from "@/lib/audit/operator-actions";
import { withPrincipal } from "@/lib/auth/guard";
import { forbidden } from "@/lib/http/problem";
import { parseQuery } from "@/lib/http/parse-body";

export const dynamic = "force-dynamic";

// GET /api/v1/audit – the operator audit trail (from, to, actor, action, target, scope, key, cursor): who did what, when, why, before and after
export const GET = withPrincipal("read", async (request, { principal, runtime }) => {
  if (principal.kind !== "operator") throw forbidden("the operator audit trail is for signed-in operators");
  return Response.json(await listOperatorActions(runtime.db.prisma, parseQuery(request, auditTrailQuerySchema)));
});
