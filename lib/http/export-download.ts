import { badRequest } from "./problem";

/**
 * Downloads of a whole filtered list, as JSON lines or CSV, read page by page through the list's
 * cursor: the keys list and the anomaly list export through this.
 */
export type ExportFormat = "jsonl" | "csv";

export const EXPORT_FORMATS: Record<ExportFormat, { contentType: string; extension: string }> = {
  jsonl: { contentType: "application/jsonl; charset=utf-8", extension: "jsonl" },
  csv: { contentType: "text/csv; charset=utf-8", extension: "csv" },
};

export function parseExportFormat(raw: string | null | undefined): ExportFormat {
  const format = raw ?? "jsonl";
  if (format !== "jsonl" && format !== "csv") throw badRequest("invalid_request", `format=${format} is not an export format; use jsonl or csv`);
  return format;
}

/** A text a spreadsheet reads as a formula: one starting with = + - @, a tab or a carriage return. */
const FORMULA_START = /^[=+\-@\t\r]/;

/**
 * The same inside a text: after a character some spreadsheet starts a new cell at (the `;` of a
 * locale whose list separator it is, a comma or tab read unquoted, a line break), spaces allowed.
 */
const FORMULA_AFTER_SEPARATOR = /([,;\t\r\n] *)([=+\-@])/g;

/**
 * RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled; one with a `;`
 * or a tab too, so a spreadsheet splitting at those keeps it one cell. A text that a spreadsheet
 * would read as a formula (a key or a summary a caller chose, starting with = + - @, a tab or a
 * carriage return, or with one of these after a separator) gets a ' before it so it stays text
 * (OWASP's CSV injection rule).
 */
export function csvField(value: unknown): string {
  if (value === null || value === undefined) return "";
  let s = value instanceof Date ? value.toISOString() : String(value);
  if (typeof value === "string") {
    if (FORMULA_START.test(s)) s = `'${s}`;
    s = s.replace(FORMULA_AFTER_SEPARATOR, "$1'$2");
  }
  return /[",;\t\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/**
 * Every item of every page, one line each: a CSV header first, then each item's columns (the
 * same fields, in the same order, make a JSON line). One page in memory at a time.
 */
export async function* exportLines<T>(
  columns: readonly (keyof T & string)[],
  format: ExportFormat,
  readPage: (cursor: string | undefined) => Promise<{ items: T[]; nextCursor: string | null }>,
): AsyncGenerator<string> {
  if (format === "csv") yield `${columns.join(",")}\r\n`;
  let cursor: string | undefined;
  do {
    const page = await readPage(cursor);
    yield page.items.map((item) => exportLine(columns, format, item)).join("");
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
}

function exportLine<T>(columns: readonly (keyof T & string)[], format: ExportFormat, item: T): string {
  const row = Object.fromEntries(columns.map((c) => [c, item[c] ?? null]));
  return format === "jsonl" ? `${JSON.stringify(row)}\n` : `${columns.map((c) => csvField(row[c])).join(",")}\r\n`;
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

/**
 * The download's response. Its first page is read before answering, so a refused filter is a
 * problem (thrown here), not a broken download.
 */
export async function exportResponse(lines: AsyncGenerator<string>, format: ExportFormat, name: string): Promise<Response> {
  const first = await lines.next();
  const stream = exportStream(
    (async function* () {
      if (!first.done) yield first.value;
      yield* lines;
    })(),
  );
  return new Response(stream, {
    headers: {
      "Content-Type": EXPORT_FORMATS[format].contentType,
      "Content-Disposition": `attachment; filename="idemgate-${name}.${EXPORT_FORMATS[format].extension}"`,
      "Cache-Control": "no-store",
    },
  });
}
