import { z } from "zod";
import { withPrincipal } from "@/lib/http/guard";
import { actorOf } from "@/lib/http/actor";
import { parseBody } from "@/lib/http/parse-body";
import { bulkReleaseKeys } from "@/lib/keys/bulk-release-keys";

export const dynamic = "force-dynamic";

const Body = z.union([
  z.object({ reason: z.string(), keys: z.array(z.object({ scope: z.string(), key: z.string() })).min(1) }),
  z.object({ reason: z.string(), filter: z.object({ tool: z.string().optional(), scope: z.string().optional(), prefix: z.string().optional() }) }),
]);

// POST /api/v1/keys/bulk-release – release the selected keys, or every stuck key matching a filter
export const POST = withPrincipal("release", async (request, { principal, runtime }) => {
  const body = await parseBody(request, Body);
  return Response.json(await bulkReleaseKeys(runtime, { ...body, actor: actorOf(principal) }));
});
