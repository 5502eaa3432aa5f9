"use client";

import { buttonClass } from "@/components/ui/styles";
import { useHeldCount, type HeldFilter } from "@/lib/console/queries/keys";
import type { BulkReleaseResult } from "@/lib/operator/bulk-release-keys";
import { heldWords, type BulkKey, type BulkTarget } from "./bulk-release-dialog";

/**
 * Above the keys table: "Release selected", and "Release all … matching this filter" when the
 * filter is on held keys (any state, stuck or unknown), enabled once a count finds one to release.
 */
export function BulkActions({ selected, filter, releaseAll, pollMs, onRelease }: {
  selected: BulkKey[];
  /** the list's filter, its state narrowed to stuck, unknown or none */
  filter: HeldFilter;
  /** whether the filter allows "Release all matching" (not on inflight or done keys) */
  releaseAll: boolean;
  pollMs: number;
  onRelease: (target: BulkTarget) => void;
}) {
  // whether "Release all … matching" has anything to release: one key is enough to know
  const anyHeld = useHeldCount(filter, 1, { enabled: releaseAll, pollMs });
  const nothingHeld = anyHeld.data?.n === 0;
  return (
    <div className="flex flex-wrap items-center gap-2" data-testid="bulk-actions">
      <button type="button" className={buttonClass("secondary")} disabled={selected.length === 0} onClick={() => onRelease({ mode: "selected", keys: selected })} data-testid="release-selected">
        Release selected{selected.length > 0 ? ` (${selected.length})` : ""}
      </button>
      {releaseAll && (
        <button
          type="button"
          className={buttonClass("secondary")}
          // disabled until the count says there is something to release
          disabled={!anyHeld.data || nothingHeld}
          title={nothingHeld ? `No ${filter.state ?? "stuck or unknown"} key matches this filter` : undefined}
          onClick={() => onRelease({ mode: "filter", filter })}
          data-testid="release-all-held"
        >
          {/* on a phone the whole label is wider than the screen: it is shown shorter, and read out whole */}
          <span>
            Release all {heldWords(filter.state)} matching<span className="max-sm:sr-only"> this filter</span>
          </span>
        </button>
      )}
      <span className="text-xs text-muted">Release deletes the reservation so the next retry runs the tool again.</span>
    </div>
  );
}

/** What a bulk release did: released, refused (each with why), until dismissed. */
export function BulkResult({ result, onDismiss }: { result: BulkReleaseResult; onDismiss: () => void }) {
  return (
    <div role="status" data-testid="bulk-result" className="flex items-start justify-between gap-4 rounded-lg border border-line bg-surface px-4 py-3 text-[13px]">
      <div>
        <p>
          <strong data-testid="bulk-released">{result.released}</strong> released,{" "}
          <strong data-testid="bulk-refused">{result.refused.length}</strong> refused
          {result.more && " — more keys matched than one request releases; run it again"}.
        </p>
        {result.refused.length > 0 && (
          <ul className="mt-1 list-disc pl-5 text-muted">
            {result.refused.slice(0, 10).map((r) => (
              <li key={`${r.scope}/${r.key}`}>
                <span className="font-mono text-[12px]">{r.key}</span> ({r.scope}): {r.reason}
              </li>
            ))}
            {result.refused.length > 10 && <li>and {result.refused.length - 10} more</li>}
          </ul>
        )}
      </div>
      <button type="button" className={buttonClass("ghost", "sm")} onClick={onDismiss} aria-label="Dismiss">
        Dismiss
      </button>
    </div>
  );
}
