import { visibleScope, withPrincipal } from "@/lib/auth/guard";
import { exportResponse, parseExportFormat } from "@/lib/http/export-download";
import { parseQuery } from "@/lib/http/parse-body";
import { exportKeys } from "@/lib/operator/export-keys";
import { KeyListQuery } from "@/lib/operator/list-keys";

export const dynamic = "force-dynamic";

const ExportQuery = KeyListQuery.omit({ cursor: true, limit: true }).extend({ format: KeyListQuery.shape.tool });

// GET /api/v1/keys/export?format=jsonl|csv – every key the filters match, streamed page by page
export const GET = withPrincipal("read", async (request, { principal, runtime }) => {
  const { format: raw, ...filters } = parseQuery(request, ExportQuery);
  const format = parseExportFormat(raw);
  const query = { ...filters, scope: visibleScope(principal, filters.scope) };
  return exportResponse(exportKeys(runtime, query, format, principal.kind === "token" ? "tenant" : "operator"), format, "keys");
});
