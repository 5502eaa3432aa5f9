"use client";

import type { AnomalyType } from "@/lib/anomalies/reconcile";
import { buttonClass, inputClass } from "@/components/ui/styles";
import { STATUSES, TYPE_INFO, TYPES } from "./anomaly-types";

export const STATUS_FILTERS = [...STATUSES, "any"] as const;
export type StatusFilter = (typeof STATUS_FILTERS)[number];

type Patch = Partial<{ status: StatusFilter | null; type: AnomalyType | null; tool: string | null }>;

export function AnomaliesFilters(props: {
  tools: string[];
  status: StatusFilter;
  type: AnomalyType | null;
  tool: string | null;
  onChange: (patch: Patch) => void;
  /** null while nothing differs from the default view */
  onClear: (() => void) | null;
  /** at the end of the bar: the saved views */
  views?: React.ReactNode;
}) {
  const { onChange } = props;
  return (
    <form role="search" aria-label="Filter anomalies" className="flex flex-wrap items-end gap-3 rounded-xl border border-line bg-surface px-4 py-3 shadow-xs" onSubmit={(e) => e.preventDefault()}>
      <div className="space-y-1">
        <label htmlFor="filter-status" className="block text-xs font-medium text-muted">Status</label>
        <select
          id="filter-status"
          data-testid="filter-status"
          value={props.status}
          // the default (open) is left out of the URL
          onChange={(e) => onChange({ status: e.target.value === "open" ? null : (e.target.value as StatusFilter) })}
          className={inputClass}
        >
          <option value="open">Open</option>
          <option value="acknowledged">Acknowledged</option>
          <option value="resolved">Resolved</option>
          <option value="any">Any status</option>
        </select>
      </div>
      <div className="space-y-1">
        <label htmlFor="filter-type" className="block text-xs font-medium text-muted">Type</label>
        <select
          id="filter-type"
          data-testid="filter-type"
          value={props.type ?? ""}
          onChange={(e) => onChange({ type: (e.target.value || null) as AnomalyType | null })}
          className={inputClass}
        >
          <option value="">Any type</option>
          {TYPES.map((t) => (
            <option key={t} value={t}>{TYPE_INFO[t].label}</option>
          ))}
        </select>
      </div>
      <div className="space-y-1">
        <label htmlFor="filter-tool" className="block text-xs font-medium text-muted">Tool</label>
        <select id="filter-tool" data-testid="filter-tool" value={props.tool ?? ""} onChange={(e) => onChange({ tool: e.target.value || null })} className={inputClass}>
          <option value="">Any tool</option>
          {[...new Set([...props.tools, ...(props.tool ? [props.tool] : [])])].map((t) => (
            <option key={t} value={t}>{t}</option>
          ))}
        </select>
      </div>
      {props.onClear && (
        <button type="button" className={buttonClass("ghost")} onClick={props.onClear} data-testid="filter-clear">
          Clear filters
        </button>
      )}
      {props.views && <div className="ml-auto">{props.views}</div>}
    </form>
  );
}
