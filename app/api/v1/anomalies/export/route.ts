import { AnomalyExportQuery } from "@/lib/anomalies/anomaly-list-query";
import { exportAnomalies } from "@/lib/anomalies/export-anomalies";
import { withPrincipal } from "@/lib/auth/guard";
import { exportResponse, parseExportFormat } from "@/lib/http/export-download";
import { parseQuery } from "@/lib/http/parse-body";
import { forbidden } from "@/lib/http/problem";

export const dynamic = "force-dynamic";

// GET /api/v1/anomalies/export?format=jsonl|csv – every anomaly the filters match, streamed page by page
export const GET = withPrincipal("read", async (request, { principal, runtime }) => {
  if (principal.kind !== "operator") throw forbidden("anomalies are for signed-in operators");
  const { format: raw, ...filters } = parseQuery(request, AnomalyExportQuery);
  const format = parseExportFormat(raw);
  return exportResponse(exportAnomalies(runtime.db.prisma, filters, format), format, "anomalies");
});
