import type { Anomaly, PrismaClient } from "@/generated/prisma/client";
import { exportLines, type ExportFormat } from "@/lib/http/export-download";
import { listAnomalies, type AnomalyQuery } from "./anomalies";

/**
 * The columns of a CSV export, in order; JSON lines carry the same fields. The evidence is left
 * out (a nested document, on each anomaly's own page); the id leads there.
 */
export const ANOMALY_EXPORT_COLUMNS = [
  "id", "type", "status", "tool", "scope", "key", "detectedAt", "updatedAt", "summary",
] as const satisfies readonly (keyof Anomaly)[];

const EXPORT_PAGE = 200;

/** Every anomaly the list's filters match, newest first, page by page through the list's cursor. */
export function exportAnomalies(
  prisma: PrismaClient,
  query: Omit<AnomalyQuery, "cursor" | "limit">,
  format: ExportFormat,
  pageSize = EXPORT_PAGE,
): AsyncGenerator<string> {
  return exportLines<Anomaly>(ANOMALY_EXPORT_COLUMNS, format, (cursor) => listAnomalies(prisma, { ...query, cursor, limit: pageSize }));
}
