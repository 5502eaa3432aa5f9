import clsx from "clsx";
import Link from "next/link";
import { STATS_WINDOWS, type StatsWindow } from "@/lib/audit/tool-stats";

/** 1h / 24h / 7d as links, so the window lives in the URL and a view can be shared. */
export function WindowPicker({ basePath, current }: { basePath: string; current: StatsWindow }) {
  return (
    <nav aria-label="Time window" data-testid="window-picker" className="inline-flex rounded-lg border border-line bg-surface p-0.5 shadow-xs">
      {(Object.keys(STATS_WINDOWS) as StatsWindow[]).map((w) => (
        <Link
          key={w}
          href={`${basePath}?window=${w}`}
          scroll={false}
          aria-current={w === current ? "true" : undefined}
          className={clsx(
            "rounded-md px-2.5 py-1 text-xs font-medium tabular-nums transition-colors",
            w === current ? "bg-surface-2 text-fg" : "text-muted hover:text-fg",
          )}
        >
          {w}
        </Link>
      ))}
    </nav>
  );
}
