import { z } from "zod";
import { withPrincipal } from "@/lib/auth/guard";
import { actorOf } from "@/lib/auth/actor";
import { parseBody } from "@/lib/http/parse-body";
import { bulkReleaseKeys, HELD_STATES } from "@/lib/operator/bulk-release-keys";
import { ReservationToken } from "@/lib/operator/release-key";

export const dynamic = "force-dynamic";

const Body = z.union([
  z.object({ reason: z.string(), keys: z.array(z.object({ scope: z.string(), key: z.string(), token: ReservationToken.optional() })).min(1) }),
  z.object({
    reason: z.string(),
    filter: z.object({ state: z.enum(HELD_STATES).optional(), tool: z.string().optional(), scope: z.string().optional(), prefix: z.string().optional() }),
  }),
]);

// POST /api/v1/keys/bulk-release – release the selected keys, or every stuck or unknown key matching a filter
// (filter.state narrows it to one of the two); a call still running is never released in bulk
export const POST = withPrincipal("release", async (request, { principal, runtime }) => {
  const body = await parseBody(request, Body);
  return Response.json(await bulkReleaseKeys(runtime, { ...body, actor: actorOf(principal) }));
});
