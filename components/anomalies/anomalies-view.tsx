"use client";

import { CursorPager } from "@/components/ui/cursor-pager";
import { parseAsArrayOf, parseAsString, parseAsStringLiteral, useQueryStates } from "nuqs";
import { PollControl } from "@/components/keys/poll-control";
import { usePollInterval } from "@/components/keys/use-poll-interval";
import { ExportLinks } from "@/components/ui/export-links";
import { ProblemAlert } from "@/components/ui/problem-alert";
import { SavedViewsMenu } from "@/components/saved-views/saved-views-menu";
import { useAnomalies, useAnomalyCounts, useReconcile } from "@/lib/console/queries/anomalies";
import { AnomaliesEmpty } from "./anomalies-empty";
import { AnomaliesFilters, STATUS_FILTERS } from "./anomalies-filters";
import { AnomaliesTable } from "./anomalies-table";
import { TYPES } from "./anomaly-types";
import { OpenCounts } from "./open-counts";
import { ReconcileButton, ReconcileOutcome } from "./reconcile-button";

export const PAGE_SIZE = 50;

const filterParsers = {
  // "any" is spelled out in the URL; no status parameter means the default, open
  status: parseAsStringLiteral(STATUS_FILTERS).withDefault("open"),
  type: parseAsStringLiteral(TYPES),
  tool: parseAsString,
  /** the cursors of the pages before this one: Previous pops, Next pushes */
  after: parseAsArrayOf(parseAsString).withDefault([]),
};

/** The anomaly list: open counts per type, filters in the URL, polling, cursor pages, an on-demand reconciler pass. */
export function AnomaliesView(props: {
  initialCounts: Record<string, number> | null;
  loadCounts: () => Promise<Record<string, number>>;
  tools: string[];
  canReconcile: boolean;
  reconcileIntervalMs: number;
  auditMode: string;
}) {
  const [filters, setFilters] = useQueryStates(filterParsers);
  const { status, type, tool, after } = filters;
  const cursor = after.length > 0 ? after[after.length - 1] : null;
  const [pollMs, setPollMs] = usePollInterval();

  const filter = new URLSearchParams();
  if (status !== "any") filter.set("status", status);
  if (type) filter.set("type", type);
  if (tool) filter.set("tool", tool);
  const params = new URLSearchParams(filter);
  params.set("limit", String(PAGE_SIZE));
  if (cursor) params.set("cursor", cursor);
  const search = params.toString();
  // the filter as the page's URL says it (the default status, open, left out; "any" spelled out), as a saved view keeps it
  const filterQuery = new URLSearchParams([...(status !== "open" ? [["status", status]] : []), ...(type ? [["type", type]] : []), ...(tool ? [["tool", tool]] : [])]).toString();

  const query = useAnomalies(search, pollMs);
  const counts = useAnomalyCounts(props.loadCounts, props.initialCounts, pollMs);
  const reconcile = useReconcile();

  const items = query.data?.items ?? [];
  const filtered = status !== "open" || Boolean(type || tool);
  const clear = () => void setFilters({ status: null, type: null, tool: null, after: null });

  return (
    <div className="space-y-4">
      <div className="flex flex-wrap items-end justify-between gap-4">
        <div className="max-w-2xl">
          <h1 className="text-xl font-semibold tracking-tight">Anomalies</h1>
          <p className="mt-1 text-muted">
            Side effects that may have happened without a done record (orphans), and duplicates answered with an old result although they were probably new actions
            (stale suppressions). Newest first.
          </p>
        </div>
        <div className="flex flex-wrap items-center gap-3">
          <ExportLinks href="/api/v1/anomalies/export" filter={filter.toString()} testId="export-anomalies" />
          <PollControl value={pollMs} onChange={setPollMs} fetching={query.isFetching} />
          {props.canReconcile && <ReconcileButton reconcile={reconcile} />}
        </div>
      </div>

      <ReconcileOutcome reconcile={reconcile} />

      {props.auditMode === "async" && (
        <p className="rounded-lg border border-warn/40 bg-warn-soft px-4 py-3 text-[13px]">
          The audit log runs in <strong>async</strong> mode: execution intents are written in batches, so a crash can lose an intent and its orphan goes unnoticed here.
          Unrecorded side effects are still found from the tools&apos; own tables.
        </p>
      )}

      <OpenCounts counts={counts.data ?? null} activeType={status === "open" ? type : null} onPick={(t) => void setFilters({ status: null, type: t, after: null })} />

      <AnomaliesFilters
        tools={props.tools}
        status={status}
        type={type}
        tool={tool}
        onChange={(patch) => void setFilters({ ...patch, after: null })}
        onClear={filtered ? clear : null}
        views={<SavedViewsMenu page="anomalies" query={filterQuery} />}
      />

      {query.error && <ProblemAlert error={query.error} testId="anomalies-error" />}

      {query.isPending ? (
        <AnomaliesTable.Skeleton />
      ) : items.length === 0 && !cursor ? (
        <AnomaliesEmpty filtered={filtered} status={status} intervalMs={props.reconcileIntervalMs} canReconcile={props.canReconcile} onClear={clear} />
      ) : (
        <AnomaliesTable items={items} nowMs={query.dataUpdatedAt || Date.now()} stale={query.isPlaceholderData} />
      )}

      <CursorPager
        page={after.length + 1}
        summary={items.length > 0 ? `${items.length} anomal${items.length === 1 ? "y" : "ies"}` : undefined}
        canPrevious={after.length > 0}
        canNext={!!query.data?.nextCursor && !query.isPlaceholderData}
        onPrevious={() => void setFilters({ after: after.length > 1 ? after.slice(0, -1) : null }, { history: "push" })}
        onNext={() => query.data?.nextCursor && void setFilters({ after: [...after, query.data.nextCursor] }, { history: "push" })}
      />
    </div>
  );
}
