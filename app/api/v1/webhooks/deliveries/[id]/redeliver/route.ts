import { z } from "zod";
import { actorOf } from "@/lib/auth/actor";
import { withPrincipal } from "@/lib/auth/guard";
import { parseBody } from "@/lib/http/parse-body";
import { webhookEndpoints } from "@/lib/notifications/endpoints";
import { redeliverDelivery } from "@/lib/notifications/redeliver";

export const dynamic = "force-dynamic";

// POST /api/v1/webhooks/deliveries/{id}/redeliver – { reason }: send a delivered or failed event to its endpoint again (same event id, new attempts)
export const POST = withPrincipal<{ id: string }>("redeliver", async (request, { params, principal, runtime }) => {
  const { reason } = await parseBody(request, z.object({ reason: z.string() }));
  const out = await redeliverDelivery(runtime.db.prisma, { id: params.id, actor: actorOf(principal), reason, endpoints: webhookEndpoints() });
  return Response.json({ redelivered: true, ...out });
});
