import { visibleScope, withPrincipal } from "@/lib/auth/guard";
import { parseQuery } from "@/lib/http/parse-body";
import { EXPORT_FORMATS, exportKeys, exportStream, parseExportFormat } from "@/lib/operator/export-keys";
import { KeyListQuery } from "@/lib/operator/list-keys";

export const dynamic = "force-dynamic";

const ExportQuery = KeyListQuery.omit({ cursor: true, limit: true }).extend({ format: KeyListQuery.shape.tool });

// GET /api/v1/keys/export?format=jsonl|csv – every key the filters match, streamed page by page
export const GET = withPrincipal("read", async (request, { principal, runtime }) => {
  const { format: raw, ...filters } = parseQuery(request, ExportQuery);
  const format = parseExportFormat(raw ?? null);
  const query = { ...filters, scope: visibleScope(principal, filters.scope) };
  // the first page is read before answering, so a refused filter is a problem, not a broken download
  const lines = exportKeys(runtime, query, format, principal.kind === "token" ? "tenant" : "operator");
  const first = await lines.next();
  const stream = exportStream((async function* () {
    if (!first.done) yield first.value;
    yield* lines;
  })());
  return new Response(stream, {
    headers: {
      "Content-Type": EXPORT_FORMATS[format].contentType,
      "Content-Disposition": `attachment; filename="idemgate-keys.${EXPORT_FORMATS[format].extension}"`,
      "Cache-Control": "no-store",
    },
  });
});
