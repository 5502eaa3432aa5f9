import { withPrincipal } from "@/lib/auth/guard";
import { z } from "zod";
import { parseBody } from "@/lib/http/parse-body";
import { actorOf } from "@/lib/auth/actor";
import { presentKey } from "@/lib/operator/present-key";
import { ReservationToken } from "@/lib/operator/release-key";
import { resolveKey } from "@/lib/operator/resolve-key";

export const dynamic = "force-dynamic";

const Body = z.object({ reason: z.string(), result: z.unknown(), status: z.number().int().optional(), force: z.boolean().optional(), token: ReservationToken.optional() });

// POST /api/v1/keys/{scope}/{key}/resolve – { reason, result, status?, force?, token? }: the side effect happened; duplicates get this result
// (an inflight key whose lease is still valid only with force: its call may still complete, and that late result is flagged;
// with the token read from the key, a key another call has taken since is refused with 409)
export const POST = withPrincipal<{ scope: string; key: string }>("resolve", async (request, { params, principal, runtime }) => {
  const body = await parseBody(request, Body);
  const after = await resolveKey(runtime, {
    scope: params.scope,
    key: params.key,
    actor: actorOf(principal),
    reason: body.reason,
    result: body.result,
    status: body.status,
    force: body.force ?? false,
    token: body.token,
  });
  return Response.json({ resolved: true, record: after ? presentKey(after, Date.now(), true) : null });
});
