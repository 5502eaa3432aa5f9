import Link from "next/link";

export interface PausedToolRow {
  tool: string;
  reason: string | null;
  actor: string | null;
  pausedAt: string | null;
  source: "operator" | "config" | null;
}

/** The overview's first line in an incident: which tools refuse new calls now, since when, who paused them and why. */
export function PausedTools({ tools }: { tools: PausedToolRow[] }) {
  if (tools.length === 0) return null;
  return (
    <section aria-labelledby="paused-heading" data-testid="paused-tools" className="rounded-xl border border-warn/40 bg-warn-soft px-5 py-4">
      <h2 id="paused-heading" className="text-xs font-medium tracking-wide uppercase">
        Paused tools: new calls refused
      </h2>
      <ul className="mt-2 space-y-1.5 text-[13px]">
        {tools.map((t) => (
          <li key={t.tool} data-testid="paused-tool" className="min-w-0 break-words">
            <Link href={`/tools/${encodeURIComponent(t.tool)}`} className="font-mono font-medium text-accent hover:underline">
              {t.tool}
            </Link>{" "}
            <span className="text-muted">
              {t.source === "config" ? "declared paused in the configuration file" : `by ${t.actor ?? "an operator"}${t.pausedAt ? ` since ${t.pausedAt.slice(0, 19).replace("T", " ")} UTC` : ""}: `}
            </span>
            {t.source !== "config" && <span>{t.reason}</span>}
          </li>
        ))}
      </ul>
    </section>
  );
}
