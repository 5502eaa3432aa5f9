import { z } from "zod";
import { ANOMALY_STATUSES, listAnomalies } from "@/lib/anomalies/anomalies";
import { withPrincipal } from "@/lib/auth/guard";
import { parseQuery } from "@/lib/http/parse-body";
import { forbidden } from "@/lib/http/problem";

export const dynamic = "force-dynamic";

const Query = z.object({
  status: z.enum(ANOMALY_STATUSES).optional(),
  type: z.string().max(64).optional(),
  tool: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().max(100).optional(),
});

// GET /api/v1/anomalies – flagged orphaned side effects and stale suppressions, newest first
export const GET = withPrincipal("read", async (request, { principal, runtime }) => {
  if (principal.kind !== "operator") throw forbidden("anomalies are for signed-in operators");
  return Response.json(await listAnomalies(runtime.db.prisma, parseQuery(request, Query)));
});
