import { z } from "zod";
import { listOperatorActions } from "@/lib/audit/operator-actions";
import { withPrincipal } from "@/lib/auth/guard";
import { forbidden } from "@/lib/http/problem";
import { parseQuery } from "@/lib/http/parse-body";

export const dynamic = "force-dynamic";

const Query = z.object({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().optional(),
  actor: z.string().optional(),
  action: z.string().optional(),
  scope: z.string().optional(),
  key: z.string().optional(),
});

// GET /api/v1/audit – the operator audit trail: who did what, when, why, before and after
export const GET = withPrincipal("read", async (request, { principal, runtime }) => {
  if (principal.kind !== "operator") throw forbidden("the operator audit trail is for signed-in operators");
  return Response.json(await listOperatorActions(runtime.db.prisma, parseQuery(request, Query)));
});
