import { z } from "zod";
import { ANOMALY_STATUSES } from "./anomalies";

/** The anomaly list's filters and page, as GET /api/v1/anomalies (and its export) read them. */
export const AnomalyListQuery = z.object({
  status: z.enum(ANOMALY_STATUSES).optional(),
  type: z.string().max(64).optional(),
  tool: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().max(100).optional(),
});

/** The export's: the list's filters and a format, the whole list rather than one page. */
export const AnomalyExportQuery = AnomalyListQuery.omit({ limit: true, cursor: true }).extend({ format: z.string().max(16).optional() });
