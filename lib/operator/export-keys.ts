import { badRequest } from "@/lib/http/problem";
import type { Runtime } from "@/lib/server/runtime";
import { KeyListQuery, listKeys } from "./list-keys";
import type { Audience, KeyView } from "./present-key";

export type ExportFormat = "jsonl" | "csv";

export const EXPORT_FORMATS: Record<ExportFormat, { contentType: string; extension: string }> = {
  jsonl: { contentType: "application/jsonl; charset=utf-8", extension: "jsonl" },
  csv: { contentType: "text/csv; charset=utf-8", extension: "csv" },
};

/** The columns of a CSV export, in order; JSON lines carry the same fields. */
export const EXPORT_COLUMNS = [
  "scope", "key", "tool", "state", "resultStatus", "replays", "executionId", "createdAt", "completedAt", "expiresAt", "leaseUntil", "outcomeNote", "fingerprint",
] as const satisfies readonly (keyof KeyView)[];

const EXPORT_PAGE = 500;

export function parseExportFormat(raw: string | null): ExportFormat {
  const format = raw ?? "jsonl";
  if (format !== "jsonl" && format !== "csv") throw badRequest("invalid_request", `format=${format} is not an export format; use jsonl or csv`);
  return format;
}

/** RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled. */
export function csvField(value: unknown): string {
  if (value === null || value === undefined) return "";
  const s = String(value);
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

function line(format: ExportFormat, k: KeyView): string {
  const row = Object.fromEntries(EXPORT_COLUMNS.map((c) => [c, k[c] ?? null]));
  return format === "jsonl" ? `${JSON.stringify(row)}\n` : `${EXPORT_COLUMNS.map((c) => csvField(row[c])).join(",")}\r\n`;
}

/**
 * Every key the list's filters match, page by page through its cursor: one page of 500 in memory
 * at a time, however many keys match. Lines as the keys list shows them (a tenant's audience
 * leaves out what it leaves out there).
 */
export async function* exportKeys(
  runtime: Pick<Runtime, "config" | "store" | "db">,
  query: Omit<KeyListQuery, "cursor" | "limit">,
  format: ExportFormat,
  audience: Audience,
  pageSize = EXPORT_PAGE,
): AsyncGenerator<string> {
  if (format === "csv") yield `${EXPORT_COLUMNS.join(",")}\r\n`;
  let cursor: string | undefined;
  do {
    const page = await listKeys(runtime, { ...query, cursor, limit: pageSize }, audience);
    yield page.items.map((k) => line(format, k)).join("");
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
}

/** A stream of the export that pulls the next page only when the reader wants more. */
export function exportStream(lines: AsyncGenerator<string>): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    async pull(controller) {
      const next = await lines.next();
      if (next.done) controller.close();
      else if (next.value) controller.enqueue(encoder.encode(next.value));
    },
    async cancel() {
      await lines.return(undefined);
    },
  });
}
