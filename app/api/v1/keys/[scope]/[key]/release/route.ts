import { withPrincipal } from "@/lib/auth/guard";
import { z } from "zod";
import { parseBody } from "@/lib/http/parse-body";
import { actorOf } from "@/lib/auth/actor";
import { presentKey } from "@/lib/operator/present-key";
import { releaseKey, ReservationToken } from "@/lib/operator/release-key";

export const dynamic = "force-dynamic";

// POST /api/v1/keys/{scope}/{key}/release – { reason, force?, token? }: the side effect did not happen, let the next retry run it
// (an inflight key whose lease is still valid only with force: its call may still complete, and that late result is flagged;
// with the token read from the key, a key another call has taken since is refused with 409)
export const POST = withPrincipal<{ scope: string; key: string }>("release", async (request, { params, principal, runtime }) => {
  const { reason, force, token } = await parseBody(request, z.object({ reason: z.string(), force: z.boolean().optional(), token: ReservationToken.optional() }));
  const before = await releaseKey(runtime, {
    scope: params.scope,
    key: params.key,
    actor: actorOf(principal),
    reason,
    force: force ?? false,
    token,
  });
  return Response.json({ released: true, before: presentKey(before, Date.now()) });
});
