"use client";

import { ProblemAlert } from "@/components/ui/problem-alert";
import { ReasonDialog } from "@/components/ui/reason-dialog";
import { useBulkRelease, useHeldCount, type HeldFilter, type HeldState } from "@/lib/console/queries/keys";
import type { BulkReleaseResult } from "@/lib/operator/bulk-release-keys";
import type { KeyView } from "@/lib/operator/present-key";

/** "stuck keys", "unknown keys", or both when no state was chosen */
export function heldWords(state: HeldState | null, n?: number): string {
  const noun = n === 1 ? "key" : "keys";
  return state ? `${state} ${noun}` : `stuck and unknown ${noun}`;
}

/** a selected key with the token of the reservation the operator saw: a key another call takes meanwhile is refused */
export type BulkKey = { scope: string; key: string; token: number };

export const bulkKeyOf = (k: KeyView): BulkKey => ({ scope: k.scope, key: k.key, token: k.token });

export type BulkTarget = { mode: "selected"; keys: BulkKey[] } | { mode: "filter"; filter: HeldFilter };

const COUNT_LIMIT = 500;

function describeFilter(f: HeldFilter): string {
  const parts = [f.tool && `tool ${f.tool}`, f.scope && `scope ${f.scope}`, f.prefix && `keys starting with "${f.prefix}"`].filter(Boolean);
  return parts.length ? parts.join(", ") : "any tool, any scope";
}

/** Confirms a bulk release: says how many keys, requires a reason, shows the API's answer or problem. */
export function BulkReleaseDialog({ target, onClose, onDone }: { target: BulkTarget; onClose: () => void; onDone: (r: BulkReleaseResult) => void }) {
  const filter = target.mode === "filter" ? target.filter : null;

  // "all matching" is re-counted when the dialog opens, so the number shown is the number released
  const count = useHeldCount(filter, COUNT_LIMIT, { enabled: filter !== null, fresh: true });

  const mutation = useBulkRelease(onDone);
  const release = (reason: string) =>
    mutation.mutate(
      target.mode === "selected" ? { reason, keys: target.keys } : { reason, filter: Object.fromEntries(Object.entries(target.filter).filter(([, v]) => v)) },
    );

  let howMany: string | null;
  if (target.mode === "selected") howMany = `${target.keys.length} selected key${target.keys.length === 1 ? "" : "s"}`;
  else if (count.data && filter) {
    const { n, more } = count.data;
    howMany = more ? `more than ${n} ${heldWords(filter.state)}` : `${n} ${heldWords(filter.state, n)}`;
  } else howMany = null;
  const nothing = target.mode === "filter" && count.data?.n === 0;

  return (
    <ReasonDialog
      title="Release keys"
      testId="bulk-release-dialog"
      onClose={onClose}
      onConfirm={release}
      pending={mutation.isPending}
      error={mutation.error}
      confirm={{ label: nothing ? "Nothing to release" : "Release", pendingLabel: "Releasing…", testId: "confirm-release", tone: "danger", disabled: howMany === null || nothing }}
    >
      <div className="text-[13px]" data-testid="bulk-release-summary">
        {howMany === null ? (
          count.error ? <ProblemAlert error={count.error} /> : <p className="text-muted">Counting {heldWords(filter?.state ?? null)}…</p>
        ) : (
          <p>
            This releases <strong data-testid="bulk-release-count">{howMany}</strong>
            {filter && <> matching {describeFilter(filter)}</>}. Each key&apos;s next retry will run the tool again: release only when you
            believe the side effects did not happen.
          </p>
        )}
        <p className="mt-1 text-muted">
          A call still running is never released in bulk: keys that are no longer {filter?.state ?? "stuck or unknown"} when the release runs are refused and
          listed.
        </p>
      </div>
    </ReasonDialog>
  );
}
