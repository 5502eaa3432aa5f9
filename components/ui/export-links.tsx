import { buttonClass } from "@/components/ui/styles";

/**
 * Downloads of every row a list's filter matches, as CSV or JSON lines (the export route streams
 * them through the list's cursor, so the download is the whole list, not the page on screen).
 */
export function ExportLinks({ href, filter, testId }: { href: string; filter: string; testId: string }) {
  const link = (format: string) => `${href}?${filter ? `${filter}&` : ""}format=${format}`;
  return (
    <span className="flex items-center gap-1" data-testid={testId}>
      <span className="text-xs text-muted">Export</span>
      <a className={buttonClass("secondary", "sm")} href={link("csv")} download data-testid="export-csv">
        CSV
      </a>
      <a className={buttonClass("secondary", "sm")} href={link("jsonl")} download data-testid="export-jsonl">
        JSON lines
      </a>
    </span>
  );
}
