import { withPrincipal } from "@/lib/http/guard";
import { z } from "zod";
import { parseBody } from "@/lib/http/parse-body";
import { actorOf } from "@/lib/http/actor";
import { presentKey } from "@/lib/keys/present-key";
import { releaseKey } from "@/lib/keys/release-key";

export const dynamic = "force-dynamic";

// POST /api/v1/keys/{scope}/{key}/release – { reason }: the side effect did not happen, let the next retry run it
export const POST = withPrincipal<{ scope: string; key: string }>("release", async (request, { params, principal, runtime }) => {
  const { reason } = await parseBody(request, z.object({ reason: z.string() }));
  const before = await releaseKey(runtime, {
    scope: decodeURIComponent(params.scope),
    key: decodeURIComponent(params.key),
    actor: actorOf(principal),
    reason,
  });
  return Response.json({ released: true, before: presentKey(before, Date.now()) });
});
