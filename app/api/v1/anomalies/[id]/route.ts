import { getAnomaly } from "@/lib/anomalies/anomalies";
import { withPrincipal } from "@/lib/auth/guard";
import { forbidden } from "@/lib/http/problem";

export const dynamic = "force-dynamic";

// GET /api/v1/anomalies/{id} – one anomaly with its evidence
export const GET = withPrincipal<{ id: string }>("read", async (_request, { params, principal, runtime }) => {
  if (principal.kind !== "operator") throw forbidden("anomalies are for signed-in operators");
  return Response.json(await getAnomaly(runtime.db.prisma, params.id));
});
