import Link from "next/link";
import type { FreshKeyCounts } from "@/lib/audit/tool-stats";
import { formatCount } from "@/lib/console/format";

/**
 * Duplicates that got through under fresh keys (the reconciler's fresh-key duplicates: confirmed by
 * an operator, or still open) next to those an advisory key's arguments window suppressed.
 */
export function FreshKeyFigure({ counts, window }: { counts: FreshKeyCounts; window: string }) {
  const through = counts.confirmed + counts.open;
  return (
    <p data-testid="fresh-key-duplicates" className="rounded-xl border border-line bg-surface px-4 py-2.5 text-[13px] shadow-xs">
      <span className="text-muted">Duplicates that got through under fresh keys · {window}: </span>
      <span data-testid="fresh-key-through" className={through > 0 ? "font-semibold text-bad tabular-nums" : "font-semibold tabular-nums"}>
        {formatCount(through)}
      </span>
      {through > 0 && (
        <span className="text-muted">
          {" "}
          ({formatCount(counts.confirmed)} confirmed, {formatCount(counts.open)}{" "}
          <Link href="/anomalies" className="text-accent hover:underline">
            open
          </Link>
          )
        </span>
      )}
      <span className="text-muted">
        {" "}
        (suppressed: <span data-testid="fresh-key-suppressed" className="font-semibold text-fg tabular-nums">{formatCount(counts.suppressed)}</span>
        {counts.genuineRepeats > 0 && `; ${formatCount(counts.genuineRepeats)} genuine ${counts.genuineRepeats === 1 ? "repeat" : "repeats"}`})
      </span>
    </p>
  );
}
