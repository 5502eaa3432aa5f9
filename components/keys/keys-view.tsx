"use client";

import { CursorPager } from "@/components/ui/cursor-pager";
import { parseAsArrayOf, parseAsString, useQueryStates } from "nuqs";
import { useEffect, useMemo, useState } from "react";
import { ProblemAlert } from "@/components/ui/problem-alert";
import { ExportLinks } from "@/components/ui/export-links";
import { SavedViewsMenu } from "@/components/saved-views/saved-views-menu";
import { HELD_STATES, useKeys } from "@/lib/console/queries/keys";
import type { BulkReleaseResult } from "@/lib/operator/bulk-release-keys";
import type { KeyView } from "@/lib/operator/present-key";
import type { KeyState } from "@/lib/idempotency/record";
import { BulkActions, BulkResult } from "./bulk-actions";
import { BulkReleaseDialog, bulkKeyOf, type BulkKey, type BulkTarget } from "./bulk-release-dialog";
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

  const search = keysSearch({ state, tool, scope, prefix }, { limit: String(PAGE_SIZE), ...(cursor ? { cursor } : {}) });
  const query = useKeys(search, pollMs);

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
        <BulkActions
          selected={selectedNow}
          filter={{ state: bulkState, tool, scope, prefix }}
          releaseAll={state === null || bulkState !== null}
          pollMs={pollMs}
          onRelease={setBulk}
        />
      )}

      {result && <BulkResult result={result} onDismiss={() => setResult(null)} />}

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
          }}
        />
      )}
    </div>
  );
}
