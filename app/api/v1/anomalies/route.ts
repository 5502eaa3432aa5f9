import { listAnomalies } from "@/lib/anomalies/anomalies";
import { AnomalyListQuery } from "@/lib/anomalies/anomaly-list-query";
import { withPrincipal } from "@/lib/auth/guard";
import { parseQuery } from "@/lib/http/parse-body";
import { forbidden } from "@/lib/http/problem";

export const dynamic = "force-dynamic";

// GET /api/v1/anomalies – flagged orphaned side effects and stale suppressions, newest first
export const GET = withPrincipal("read", async (request, { principal, runtime }) => {
  if (principal.kind !== "operator") throw forbidden("anomalies are for signed-in operators");
  return Response.json(await listAnomalies(runtime.db.prisma, parseQuery(request, AnomalyListQuery)));
});
