import { z } from "zod";
import { createApiToken, listApiTokens } from "@/lib/auth/api-tokens";
import { actorOf } from "@/lib/auth/actor";
import { withPrincipal } from "@/lib/auth/guard";
import { parseBody } from "@/lib/http/parse-body";
import { forbidden } from "@/lib/http/problem";

export const dynamic = "force-dynamic";

// GET /api/v1/tokens – API tokens (never their secrets)
export const GET = withPrincipal("manage_tokens", async (_request, { runtime }) => Response.json({ tokens: await listApiTokens(runtime.db.prisma) }));

// POST /api/v1/tokens – { scope, label?, advisoryKeys? }: a new token for one scope, shown once (recorded in the audit trail)
export const POST = withPrincipal("manage_tokens", async (request, { principal, runtime }) => {
  if (principal.kind === "token") throw forbidden("tokens are created by operators");
  const body = await parseBody(request, z.object({ scope: z.string(), label: z.string().max(200).optional(), advisoryKeys: z.boolean().optional() }));
  const created = await createApiToken(runtime.db.prisma, { ...body, actor: actorOf(principal) });
  return Response.json(created, { status: 201 });
});
