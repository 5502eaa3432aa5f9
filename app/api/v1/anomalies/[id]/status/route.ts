import { z } from "zod";
import { ANOMALY_STATUSES, setAnomalyStatus } from "@/lib/anomalies/anomalies";
import { actorOf } from "@/lib/auth/actor";
import { withPrincipal } from "@/lib/auth/guard";
import { parseBody } from "@/lib/http/parse-body";

export const dynamic = "force-dynamic";

// POST /api/v1/anomalies/{id}/status – { status: acknowledged | resolved | open, reason }; operators only.
// For a fresh_key_duplicate, acknowledged = a genuine repeat, resolved = a confirmed duplicate that
// got through (recorded in the trail as confirm_genuine_repeat / confirm_duplicate).
export const POST = withPrincipal<{ id: string }>("acknowledge", async (request, { params, principal, runtime }) => {
  const body = await parseBody(request, z.object({ status: z.enum(ANOMALY_STATUSES), reason: z.string() }));
  return Response.json(await setAnomalyStatus(runtime.db.prisma, { id: params.id, ...body, actor: actorOf(principal) }));
});
