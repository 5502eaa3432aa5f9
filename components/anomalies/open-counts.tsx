"use client";

import clsx from "clsx";
import type { AnomalyType } from "@/lib/anomalies/reconcile";
import { formatCount } from "@/lib/console/format";
import { TYPE_INFO, TYPES } from "./anomaly-types";

/** One card per anomaly type: how many are open, and in one line what the type means. A card filters the list. */
export function OpenCounts({ counts, activeType, onPick }: { counts: Record<string, number> | null; activeType: string | null; onPick: (type: AnomalyType | null) => void }) {
  return (
    <section aria-labelledby="open-counts-heading">
      <h2 id="open-counts-heading" className="mb-2 text-xs font-medium tracking-wide text-muted uppercase">
        Open, by type
      </h2>
      {counts === null && <p className="mb-2 text-[13px] text-bad">The audit database did not answer; counts are unavailable.</p>}
      <ul className="grid grid-cols-2 gap-2 sm:grid-cols-3 sm:gap-3 xl:grid-cols-6">
        {TYPES.map((type) => {
          const n = counts?.[type] ?? 0;
          const active = activeType === type;
          return (
            <li key={type} className="min-w-0">
              <button
                type="button"
                data-testid={`open-count-${type}`}
                data-count={counts ? n : ""}
                title={TYPE_INFO[type].explanation}
                aria-pressed={active}
                onClick={() => onPick(active ? null : type)}
                className={clsx(
                  "flex h-full w-full flex-col rounded-xl border bg-surface px-4 py-3 text-left shadow-xs transition-colors hover:border-line-strong focus-visible:outline-2 focus-visible:outline-accent",
                  active ? "border-accent ring-1 ring-accent" : n > 0 ? "border-bad/40" : "border-line",
                )}
              >
                <span className="flex items-baseline justify-between gap-2">
                  <span className="text-[13px] font-medium">{TYPE_INFO[type].label}</span>
                  <span className={clsx("text-xl font-semibold tabular-nums", n > 0 ? "text-bad" : "text-faint")}>{counts ? formatCount(n) : "—"}</span>
                </span>
                {/* on a phone the cards stay compact; the explanation is in each anomaly's page */}
                <span className="mt-1 hidden text-xs leading-snug text-muted sm:block">{TYPE_INFO[type].explanation}</span>
              </button>
            </li>
          );
        })}
      </ul>
    </section>
  );
}
