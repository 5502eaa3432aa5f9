"use client";

import clsx from "clsx";
import Link from "next/link";
import { keyHref } from "@/lib/console/api";
import { formatRelative, formatTimestamp } from "@/lib/console/format";
import type { AnomalyView } from "@/lib/console/queries/anomalies";
import { anomalyHref, typeInfo } from "./anomaly-types";
import { AnomalyStatusBadge } from "./status-badge";

export function AnomaliesTable({ items, nowMs, stale }: { items: AnomalyView[]; nowMs: number; stale: boolean }) {
  return (
    <>
      <AnomalyCards items={items} nowMs={nowMs} stale={stale} />
      <AnomalyRows items={items} nowMs={nowMs} stale={stale} />
    </>
  );
}

/** Below the sm breakpoint a table would hide the key and status behind a sideways scroll: one card per anomaly instead. */
function AnomalyCards({ items, nowMs, stale }: { items: AnomalyView[]; nowMs: number; stale: boolean }) {
  return (
    <ul className={clsx("divide-y divide-line rounded-xl border border-line bg-surface shadow-xs transition-opacity sm:hidden", stale && "opacity-60")} aria-busy={stale}>
      {items.map((a) => (
        <li key={a.id} data-testid="anomaly-card" data-id={a.id} data-type={a.type} data-key={a.key ?? ""} data-status={a.status} className="space-y-1 px-4 py-3">
          <div className="flex items-center justify-between gap-3">
            <Link href={anomalyHref(a.id)} className="font-medium text-accent hover:underline">
              {typeInfo(a.type).label}
            </Link>
            <AnomalyStatusBadge status={a.status} />
          </div>
          <p className="line-clamp-2 text-xs text-muted">{a.summary}</p>
          <p className="flex flex-wrap items-center gap-x-2 text-xs text-muted">
            <span className="font-mono text-[12px] text-fg">{a.tool}</span>
            <span aria-hidden="true">·</span>
            <span title={formatTimestamp(a.detectedAt)}>{formatRelative(a.detectedAt, nowMs)}</span>
          </p>
          {a.scope && a.key && (
            <Link href={keyHref(a.scope, a.key)} className="block truncate font-mono text-[12px] text-accent hover:underline">
              {a.key} <span className="text-faint">({a.scope})</span>
            </Link>
          )}
        </li>
      ))}
    </ul>
  );
}

function AnomalyRows({ items, nowMs, stale }: { items: AnomalyView[]; nowMs: number; stale: boolean }) {
  return (
    <div className={clsx("hidden overflow-x-auto rounded-xl border border-line bg-surface shadow-xs transition-opacity sm:block", stale && "opacity-60")}>
      <table className="w-full min-w-[860px] table-fixed text-[13px]" data-testid="anomalies-table" aria-busy={stale}>
        <colgroup>
          <col />
          <col className="w-40" />
          <col className="w-60" />
          <col className="w-28" />
          <col className="w-32" />
        </colgroup>
        <thead>
          <tr className="border-b border-line text-left text-xs text-muted">
            <th scope="col" className="px-4 py-2 font-medium">Anomaly</th>
            <th scope="col" className="px-4 py-2 font-medium">Tool</th>
            <th scope="col" className="px-4 py-2 font-medium">Key</th>
            <th scope="col" className="px-4 py-2 font-medium">Detected</th>
            <th scope="col" className="px-4 py-2 font-medium">Status</th>
          </tr>
        </thead>
        <tbody className="divide-y divide-line">
          {items.map((a) => {
            const info = typeInfo(a.type);
            return (
              <tr key={a.id} data-testid="anomaly-row" data-id={a.id} data-type={a.type} data-key={a.key ?? ""} data-status={a.status} className="align-top hover:bg-surface-2/60">
                <td className="px-4 py-2.5">
                  <Link href={anomalyHref(a.id)} className="font-medium text-accent hover:underline" title={info.explanation} data-testid="anomaly-link">
                    {info.label}
                  </Link>
                  <p className="mt-0.5 truncate text-xs text-muted" title={a.summary}>
                    {a.summary}
                  </p>
                </td>
                <td className="truncate px-4 py-2.5 font-mono text-[12.5px]" title={a.tool}>{a.tool}</td>
                <td className="px-4 py-2.5">
                  {a.scope && a.key ? (
                    <>
                      <Link href={keyHref(a.scope, a.key)} className="block truncate font-mono text-[12.5px] text-accent hover:underline" title={a.key} data-testid="anomaly-key-link">
                        {a.key}
                      </Link>
                      <span className="block truncate font-mono text-[11px] text-faint" title={`scope ${a.scope}`}>{a.scope}</span>
                    </>
                  ) : (
                    <span className="text-faint">{a.key ?? "no key"}</span>
                  )}
                </td>
                <td className="px-4 py-2.5 whitespace-nowrap text-muted" title={formatTimestamp(a.detectedAt)}>
                  {formatRelative(a.detectedAt, nowMs)}
                </td>
                <td className="px-4 py-2.5"><AnomalyStatusBadge status={a.status} /></td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

AnomaliesTable.Skeleton = function AnomaliesTableSkeleton() {
  return (
    <div data-testid="anomalies-loading" role="status" aria-busy="true" aria-label="Loading anomalies" className="overflow-hidden rounded-xl border border-line bg-surface shadow-xs">
      <div className="h-9 border-b border-line bg-surface-2/50" />
      {Array.from({ length: 6 }, (_, i) => (
        <div key={i} className="flex items-center gap-6 border-b border-line px-4 py-3.5 last:border-0">
          <div className="h-4 w-72 animate-pulse rounded bg-surface-2" />
          <div className="h-4 w-28 animate-pulse rounded bg-surface-2" />
          <div className="h-4 w-44 animate-pulse rounded bg-surface-2" />
          <div className="h-4 w-16 animate-pulse rounded-full bg-surface-2" />
        </div>
      ))}
    </div>
  );
};
