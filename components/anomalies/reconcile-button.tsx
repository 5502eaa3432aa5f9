"use client";

import { ProblemAlert } from "@/components/ui/problem-alert";
import { buttonClass } from "@/components/ui/styles";
import { formatCount } from "@/lib/console/format";
import type { Reconcile } from "@/lib/console/queries/anomalies";

export function ReconcileButton({ reconcile }: { reconcile: Reconcile }) {
  return (
    <button type="button" className={buttonClass("primary")} disabled={reconcile.isPending} onClick={() => reconcile.mutate()} data-testid="run-reconciler">
      {reconcile.isPending ? "Reconciling…" : "Run reconciler now"}
    </button>
  );
}

const plural = (n: number, one: string, many: string) => `${formatCount(n)} ${n === 1 ? one : many}`;

/** What the last pass examined and found, until dismissed. */
export function ReconcileOutcome({ reconcile }: { reconcile: Reconcile }) {
  if (reconcile.error) return <ProblemAlert error={reconcile.error} testId="reconcile-error" />;
  const r = reconcile.data;
  if (!r) return null;
  return (
    <div
      role="status"
      data-testid="reconcile-result"
      data-flagged={r.flagged}
      data-created={r.created}
      className="flex items-start justify-between gap-4 rounded-lg border border-line bg-surface px-4 py-3 text-[13px]"
    >
      <p>
        Reconciler pass done. Examined {plural(r.examined.executions, "execution", "executions")}, {plural(r.examined.suppressions, "replay", "replays")} and{" "}
        {plural(r.examined.effects, "side effect", "side effects")}: <strong data-testid="reconcile-flagged">{formatCount(r.flagged)}</strong> flagged,{" "}
        <strong data-testid="reconcile-created">{formatCount(r.created)}</strong> new
        {r.backfilled > 0 && `, ${plural(r.backfilled, "lost outcome", "lost outcomes")} filled in from the key store`}.
        {r.flagged > r.created && (
          <span className="text-muted"> {r.flagged - r.created === 1 ? "The other one was" : `The other ${formatCount(r.flagged - r.created)} were`} already listed.</span>
        )}
      </p>
      <button type="button" className={buttonClass("ghost", "sm")} onClick={() => reconcile.reset()} aria-label="Dismiss">
        Dismiss
      </button>
    </div>
  );
}
