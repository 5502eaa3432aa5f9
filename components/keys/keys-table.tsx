"use client";

import clsx from "clsx";
import Link from "next/link";
import { keyHref } from "@/lib/console/api";
import { formatRelative, formatTimestamp } from "@/lib/console/format";
import type { KeyView } from "@/lib/operator/present-key";
import { StateBadge } from "./state-badge";

export const rowId = (k: { scope: string; key: string }) => `${k.scope}\u0000${k.key}`;

function LeaseCell({ k, nowMs }: { k: KeyView; nowMs: number }) {
  if (k.state === "unknown") {
    return (
      <span title={formatTimestamp(k.unknownAt)} className="block w-[13rem] whitespace-normal">
        <span className="text-unknown">outcome unknown</span> {formatRelative(k.unknownAt, nowMs)}
        {k.outcomeNote && (
          <span className="line-clamp-2 text-xs wrap-anywhere text-muted" title={k.outcomeNote} data-testid="row-outcome-note">
            {k.outcomeNote}
          </span>
        )}
      </span>
    );
  }
  if (k.state === "inflight" || k.state === "stuck") {
    const passed = k.leaseUntil !== null && new Date(k.leaseUntil).getTime() <= nowMs;
    return (
      <span title={formatTimestamp(k.leaseUntil)} className={clsx(passed && "text-warn")}>
        lease {passed ? "ended" : "ends"} {formatRelative(k.leaseUntil, nowMs)}
      </span>
    );
  }
  return (
    <span title={formatTimestamp(k.expiresAt)} className="text-muted">
      {k.state === "expired" ? "expired" : "expires"} {formatRelative(k.expiresAt, nowMs)}
    </span>
  );
}

export function KeysTable(props: {
  items: KeyView[];
  nowMs: number;
  selectable: boolean;
  selected: Map<string, unknown>;
  releasable: Set<string>;
  onToggle: (k: KeyView) => void;
  onToggleAll: (on: boolean) => void;
  stale: boolean;
}) {
  const { items, nowMs, selectable, selected, releasable } = props;
  const selectableCount = items.filter((k) => releasable.has(rowId(k))).length;
  const allSelected = selectableCount > 0 && items.every((k) => !releasable.has(rowId(k)) || selected.has(rowId(k)));
  return (
    // the key column takes the width the others leave (w-full with max-w-0: a long key is cut with an
    // ellipsis rather than widening the table), at least 8rem, so the table fits its frame from
    // 1024 px up and scrolls in it down to 768 px; below, on a phone, the table keeps state, key and
    // tool (under the key) only, and fits the screen
    <div className={clsx("overflow-x-auto rounded-xl border border-line bg-surface shadow-xs transition-opacity", props.stale && "opacity-60")}>
      <table className="w-full text-[13px] md:min-w-[900px]" data-testid="keys-table" aria-busy={props.stale}>
        <thead>
          <tr className="border-b border-line text-left text-xs text-muted">
            {selectable && (
              <th scope="col" className="w-10 py-2 pl-4">
                <input
                  type="checkbox"
                  aria-label="Select every stuck or unknown key on this page"
                  checked={allSelected}
                  disabled={selectableCount === 0}
                  onChange={(e) => props.onToggleAll(e.target.checked)}
                  className="size-4 accent-(--accent)"
                />
              </th>
            )}
            <th scope="col" className="px-4 py-2 font-medium">State</th>
            <th scope="col" className="px-4 py-2 font-medium">Key</th>
            <th scope="col" className="hidden px-4 py-2 font-medium md:table-cell">Tool</th>
            <th scope="col" className="hidden px-4 py-2 font-medium md:table-cell">Scope</th>
            <th scope="col" className="hidden px-4 py-2 font-medium md:table-cell">Created</th>
            <th scope="col" className="hidden px-4 py-2 text-right font-medium md:table-cell">Replays</th>
            <th scope="col" className="hidden px-4 py-2 font-medium md:table-cell">Lease / expiry</th>
          </tr>
        </thead>
        <tbody className="divide-y divide-line">
          {items.map((k) => {
            const id = rowId(k);
            const canSelect = releasable.has(id);
            return (
              <tr key={id} data-testid="key-row" data-key={k.key} data-state={k.state} className="hover:bg-surface-2/60">
                {selectable && (
                  <td className="py-2 pl-4">
                    {canSelect && (
                      <input
                        type="checkbox"
                        aria-label={`Select ${k.key}`}
                        checked={selected.has(id)}
                        onChange={() => props.onToggle(k)}
                        className="size-4 accent-(--accent)"
                        data-testid="row-select"
                      />
                    )}
                  </td>
                )}
                <td className="px-4 py-2"><StateBadge state={k.state} resultStatus={k.resultStatus} /></td>
                <td className="w-full max-w-0 min-w-[8rem] px-4 py-2">
                  <Link href={keyHref(k.scope, k.key)} className="block truncate font-mono text-[12.5px] text-accent hover:underline" title={k.key}>
                    {k.key}
                  </Link>
                  {k.fallback && <span className="text-[11px] text-warn">fallback key</span>}
                  <span className="block truncate font-mono text-[11.5px] text-muted md:hidden">
                    {k.tool} · {k.scope} · {formatRelative(k.createdAt, nowMs)}
                  </span>
                </td>
                <td className="hidden px-4 py-2 font-mono text-[12.5px] whitespace-nowrap md:table-cell">{k.tool}</td>
                <td className="hidden px-4 py-2 font-mono text-[12.5px] whitespace-nowrap md:table-cell">{k.scope}</td>
                <td className="hidden px-4 py-2 whitespace-nowrap text-muted md:table-cell" title={formatTimestamp(k.createdAt)}>{formatRelative(k.createdAt, nowMs)}</td>
                <td className={clsx("hidden px-4 py-2 text-right tabular-nums md:table-cell", !k.replays && "text-faint")} data-testid="row-replays">{k.replays ?? 0}</td>
                <td className="hidden px-4 py-2 whitespace-nowrap md:table-cell"><LeaseCell k={k} nowMs={nowMs} /></td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

KeysTable.Skeleton = function KeysTableSkeleton() {
  return (
    <div data-testid="keys-loading" role="status" aria-busy="true" aria-label="Loading keys" className="overflow-hidden rounded-xl border border-line bg-surface shadow-xs">
      <div className="h-9 border-b border-line bg-surface-2/50" />
      {Array.from({ length: 8 }, (_, i) => (
        <div key={i} className="flex items-center gap-6 border-b border-line px-4 py-3 last:border-0">
          <div className="h-4 w-16 animate-pulse rounded-full bg-surface-2" />
          <div className="h-4 w-64 animate-pulse rounded bg-surface-2" />
          <div className="h-4 w-28 animate-pulse rounded bg-surface-2" />
          <div className="h-4 w-16 animate-pulse rounded bg-surface-2" />
          <div className="h-4 w-20 animate-pulse rounded bg-surface-2" />
        </div>
      ))}
    </div>
  );
};
