"use client";

import { keepPreviousData, useQuery, useQueryClient } from "@tanstack/react-query";
import { CursorPager } from "@/components/ui/cursor-pager";
import { parseAsArrayOf, parseAsString, useQueryStates } from "nuqs";
import { useEffect, useMemo, useState } from "react";
import { ProblemAlert } from "@/components/ui/problem-alert";
import { ExportLinks } from "@/components/ui/export-links";
import { buttonClass } from "@/components/ui/styles";
import { SavedViewsMenu } from "@/components/saved-views/saved-views-menu";
import { apiFetch } from "@/lib/console/api";
import type { BulkReleaseResult } from "@/lib/operator/bulk-release-keys";
import type { KeyPage, KeyView } from "@/lib/operator/present-key";
import type { KeyState } from "@/lib/idempotency/record";
import { BulkReleaseDialog, bulkKeyOf, countHeld, HELD_STATES, heldWords, type BulkKey, type BulkTarget } from "./bulk-release-dialog";
import { KeysFilters, KEY_STATES } from "./keys-filters";
import { KeysEmpty } from "./keys-empty";
import { KeysTable, rowId } from "./keys-table";
import { PollControl } from "./poll-control";
import { usePollInterval } from "./use-poll-interval";

export const PAGE_SIZE = 50;

const filterParsers = {
  // read as written, so a state that is not one can be said (parseAsStringLiteral would drop it silently)
  state: parseAsString,
  tool: parseAsString,
  scope: parseAsString,
  prefix: parseAsString,
  /** the cursors of the pages before this one: Previous pops, Next pushes */
  after: parseAsArrayOf(parseAsString).withDefault([]),
};

export function keysSearch(f: { state?: string | null; tool?: string | null; scope?: string | null; prefix?: string | null }, extra: Record<string, string> = {}) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries({ state: f.state, tool: f.tool, scope: f.scope, prefix: f.prefix, ...extra })) {
    if (v) params.set(k, v);
  }
  return params.toString();
}

/** The keys list: filters in the URL, polling the operator chose, cursor pages, bulk release. */
export function KeysView({ tools, canRelease, gatewayExample }: { tools: string[]; canRelease: boolean; gatewayExample: string }) {
  const [filters, setFilters] = useQueryStates(filterParsers);
  const { tool, scope, prefix, after } = filters;
  const state = (KEY_STATES as readonly string[]).includes(filters.state ?? "") ? (filters.state as KeyState) : null;
  const badState = filters.state !== null && state === null ? filters.state : null;
  const cursor = after.length > 0 ? after[after.length - 1] : null;
  const [pollMs, setPollMs] = usePollInterval();
  const queryClient = useQueryClient();

  const search = keysSearch({ state, tool, scope, prefix }, { limit: String(PAGE_SIZE), ...(cursor ? { cursor } : {}) });
  const query = useQuery({
    queryKey: ["keys", search],
    queryFn: ({ signal }) => apiFetch<KeyPage>(`/api/v1/keys?${search}`, { signal }),
    // the last page stays on screen while the next one loads
    placeholderData: keepPreviousData,
    // React Query never starts an interval refetch while one is still in flight
    refetchInterval: pollMs > 0 ? pollMs : false,
    refetchIntervalInBackground: false,
  });

  const [selected, setSelected] = useState<Map<string, BulkKey>>(new Map());
  const [bulk, setBulk] = useState<BulkTarget | null>(null);
  const [result, setResult] = useState<BulkReleaseResult | null>(null);
  const filterKey = keysSearch({ state, tool, scope, prefix });
  useEffect(() => setSelected(new Map()), [filterKey, cursor]);

  const items = useMemo(() => query.data?.items ?? [], [query.data]);
  // selection only holds rows still releasable on this page: held keys (a running call is never released in bulk)
  const releasable = useMemo(() => new Set(items.filter((k) => HELD_STATES.includes(k.state)).map(rowId)), [items]);
  const bulkState = state === "stuck" || state === "unknown" ? state : null;
  const selectedNow = [...selected.entries()].filter(([id]) => releasable.has(id)).map(([, v]) => v);
  const hasFilters = Boolean(state || tool || scope || prefix);
  // whether "Release all … matching" has anything to release: one key is enough to know
  const showReleaseAll = canRelease && (state === null || bulkState !== null);
  const anyHeld = useQuery({
    queryKey: ["held-count", { state: bulkState, tool, scope, prefix }, 1],
    queryFn: ({ signal }) => countHeld({ state: bulkState, tool, scope, prefix }, 1, signal),
    enabled: showReleaseAll,
    refetchInterval: pollMs > 0 ? pollMs : false,
    refetchIntervalInBackground: false,
  });
  const nothingHeld = anyHeld.data?.n === 0;

  const toggle = (k: KeyView) =>
    setSelected((prev) => {
      const next = new Map(prev);
      if (next.has(rowId(k))) next.delete(rowId(k));
      else next.set(rowId(k), bulkKeyOf(k));
      return next;
    });
  const toggleAll = (on: boolean) =>
    setSelected(on ? new Map(items.filter((k) => releasable.has(rowId(k))).map((k) => [rowId(k), bulkKeyOf(k)])) : new Map());

  return (
    <div className="space-y-4">
      <div className="flex flex-wrap items-end justify-between gap-4">
        <div>
          <h1 className="text-xl font-semibold tracking-tight">Keys</h1>
          <p className="mt-1 text-muted">Every idempotency key the gateway holds, newest first. Payloads are only shown on a key&apos;s own page.</p>
        </div>
        <div className="flex flex-wrap items-center gap-2">
          <ExportLinks href="/api/v1/keys/export" filter={filterKey} testId="export-keys" />
          <PollControl value={pollMs} onChange={setPollMs} fetching={query.isFetching} />
        </div>
      </div>

      <KeysFilters
        tools={tools}
        state={state}
        tool={tool}
        scope={scope}
        prefix={prefix}
        onChange={(patch) => void setFilters({ ...patch, after: null })}
        onClear={() => void setFilters({ state: null, tool: null, scope: null, prefix: null, after: null })}
        views={<SavedViewsMenu page="keys" query={filterKey} />}
      />

      {canRelease && (
        <div className="flex flex-wrap items-center gap-2" data-testid="bulk-actions">
          <button type="button" className={buttonClass("secondary")} disabled={selectedNow.length === 0} onClick={() => setBulk({ mode: "selected", keys: selectedNow })} data-testid="release-selected">
            Release selected{selectedNow.length > 0 ? ` (${selectedNow.length})` : ""}
          </button>
          {showReleaseAll && (
            <button
              type="button"
              className={buttonClass("secondary")}
              // disabled until the count says there is something to release
              disabled={!anyHeld.data || nothingHeld}
              title={nothingHeld ? `No ${bulkState ?? "stuck or unknown"} key matches this filter` : undefined}
              onClick={() => setBulk({ mode: "filter", filter: { state: bulkState, tool, scope, prefix } })}
              data-testid="release-all-held"
            >
              {/* on a phone the whole label is wider than the screen: it is shown shorter, and read out whole */}
              <span>
                Release all {heldWords(bulkState)} matching<span className="max-sm:sr-only"> this filter</span>
              </span>
            </button>
          )}
          <span className="text-xs text-muted">Release deletes the reservation so the next retry runs the tool again.</span>
        </div>
      )}

      {result && (
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
          <button type="button" className={buttonClass("ghost", "sm")} onClick={() => setResult(null)} aria-label="Dismiss">
            Dismiss
          </button>
        </div>
      )}

      {badState !== null && (
        <p role="alert" data-testid="keys-bad-state" className="rounded-lg border border-warn/30 bg-warn-soft px-4 py-3 text-[13px] text-warn">
          There is no key state <span className="font-mono">&quot;{badState}&quot;</span>: showing keys in every state. The states are {KEY_STATES.join(", ")}.
        </p>
      )}

      {query.error && <ProblemAlert error={query.error} testId="keys-error" />}

      {query.isPending ? (
        <KeysTable.Skeleton />
      ) : items.length === 0 && !cursor ? (
        <KeysEmpty filtered={hasFilters} gatewayExample={gatewayExample} onClear={() => void setFilters({ state: null, tool: null, scope: null, prefix: null, after: null })} />
      ) : (
        <KeysTable
          items={items}
          nowMs={query.dataUpdatedAt || Date.now()}
          selectable={canRelease}
          selected={selected}
          releasable={releasable}
          onToggle={toggle}
          onToggleAll={toggleAll}
          stale={query.isPlaceholderData}
        />
      )}

      <CursorPager
        page={after.length + 1}
        summary={items.length > 0 ? `${items.length} key${items.length === 1 ? "" : "s"}` : undefined}
        canPrevious={after.length > 0}
        canNext={!!query.data?.nextCursor && !query.isPlaceholderData}
        onPrevious={() => void setFilters({ after: after.length > 1 ? after.slice(0, -1) : null }, { history: "push" })}
        onNext={() => query.data?.nextCursor && void setFilters({ after: [...after, query.data.nextCursor] }, { history: "push" })}
      />

      {bulk && (
        <BulkReleaseDialog
          target={bulk}
          onClose={() => setBulk(null)}
          onDone={(r) => {
            setBulk(null);
            setResult(r);
            setSelected(new Map());
            void queryClient.invalidateQueries({ queryKey: ["keys"] });
            void queryClient.invalidateQueries({ queryKey: ["held-count"] });
          }}
        />
      )}
    </div>
  );
}
