import { exportLines, type ExportFormat } from "@/lib/http/export-download";
import type { Runtime } from "@/lib/server/runtime";
import { KeyListQuery, listKeys } from "./list-keys";
import type { Audience, KeyView } from "./present-key";

/** The columns of a CSV export, in order; JSON lines carry the same fields. */
export const EXPORT_COLUMNS = [
  "scope", "key", "tool", "state", "resultStatus", "replays", "executionId", "createdAt", "completedAt", "expiresAt", "leaseUntil", "outcomeNote", "fingerprint",
] as const satisfies readonly (keyof KeyView)[];

const EXPORT_PAGE = 500;

/**
 * Every key the list's filters match, page by page through its cursor: one page of 500 in memory
 * at a time, however many keys match. Lines as the keys list shows them (a tenant's audience
 * leaves out what it leaves out there).
 */
export function exportKeys(
  runtime: Pick<Runtime, "config" | "store" | "db">,
  query: Omit<KeyListQuery, "cursor" | "limit">,
  format: ExportFormat,
  audience: Audience,
  pageSize = EXPORT_PAGE,
): AsyncGenerator<string> {
  return exportLines<KeyView>(EXPORT_COLUMNS, format, (cursor) => listKeys(runtime, { ...query, cursor, limit: pageSize }, audience));
}
