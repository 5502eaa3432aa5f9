import { z } from "zod";
import { revokeApiToken } from "@/lib/auth/api-tokens";
import { actorOf } from "@/lib/auth/actor";
import { withPrincipal } from "@/lib/auth/guard";
import { parseBody } from "@/lib/http/parse-body";
import { notFound } from "@/lib/http/problem";
import { requireReason } from "@/lib/audit/operator-actions";

export const dynamic = "force-dynamic";

// POST /api/v1/tokens/{id}/revoke – { reason }: the token gets 401 from now on in this process, within
// TOKEN_CACHE_MS (5 s) in others (recorded in the audit trail)
export const POST = withPrincipal<{ id: string }>("manage_tokens", async (request, { params, principal, runtime }) => {
  const { reason } = await parseBody(request, z.object({ reason: z.string() }));
  const text = requireReason(reason);
  if (!(await revokeApiToken(runtime.db.prisma, { id: params.id, actor: actorOf(principal), reason: text }))) throw notFound("no active token with this id");
  return Response.json({ revoked: true });
});
