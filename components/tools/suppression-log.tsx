import clsx from "clsx";
import Link from "next/link";
import type { StaleFlag } from "@/lib/anomalies/stale-flags";
import type { SuppressionLogEntry } from "@/lib/audit/tool-stats";
import { fmt } from "@/lib/audit/retry-gaps";
import { keyHref } from "@/lib/console/api";
import { formatTimestamp } from "@/lib/console/format";
import { TableHead } from "@/components/ui/table-head";

const KIND_STYLE: Record<string, string> = {
  replay: "bg-ok-soft text-ok",
  conflict: "bg-warn-soft text-warn",
  stuck: "bg-bad-soft text-bad",
  mismatch: "bg-surface-2 text-fg",
};

const COLUMNS = [{ label: "At" }, { label: "Kind" }, { label: "Key" }, { label: "Gap", align: "right" }, { label: "Session ← original" }] as const;

/**
 * The latest suppressions: which duplicate was answered from which record, how late, for which
 * session; a row the reconciler flagged as a stale suppression (probably a new action answered
 * from the old result) is marked and links to its anomaly, whose evidence says why.
 */
export function SuppressionLog({ entries, staleFlags }: { entries: SuppressionLogEntry[]; staleFlags: Record<string, StaleFlag> }) {
  if (entries.length === 0) {
    return <p className="px-5 py-6 text-[13px] text-muted">No duplicates in this window: every call ran its side effect once.</p>;
  }
  return (
    <div className="overflow-x-auto">
      <table data-testid="suppression-log" className="w-full text-[13px]">
        <TableHead columns={COLUMNS} />
        <tbody className="divide-y divide-line">
          {entries.map((s) => {
            const flag = staleFlags[s.id];
            const otherSession = s.originalSession !== null && s.session !== s.originalSession;
            return (
              <tr key={s.id} data-testid="suppression-row" data-kind={s.kind} data-stale={flag ? "true" : undefined} className={flag ? "bg-warn-soft/40" : undefined}>
                <td className="px-5 py-2 whitespace-nowrap text-muted tabular-nums">{formatTimestamp(s.at)}</td>
                <td className="px-3 py-2">
                  <span className={clsx("inline-flex rounded-full px-2 py-0.5 text-[11px] font-medium", KIND_STYLE[s.kind] ?? KIND_STYLE.mismatch)}>{s.kind}</span>
                  {s.fallback && (
                    <span title="answered through a fallback (argument-hash) key" className="ml-1.5 rounded-full bg-warn-soft px-2 py-0.5 text-[11px] font-medium text-warn">
                      fallback
                    </span>
                  )}
                  {flag && (
                    <Link
                      href={`/anomalies/${encodeURIComponent(flag.anomalyId)}`}
                      className="ml-1.5 inline-flex rounded-full bg-warn-soft px-2 py-0.5 text-[11px] font-medium text-warn hover:underline"
                      title={`flagged as a stale suppression (anomaly ${flag.status}): probably a new action answered from the old result`}
                      data-testid="stale-flag"
                    >
                      flagged stale
                    </Link>
                  )}
                </td>
                <td className="max-w-72 px-3 py-2">
                  <Link href={keyHref(s.scope, s.key)} className="block truncate font-mono text-[12px] text-accent hover:underline" title={`${s.scope} / ${s.key}`}>
                    <span className="text-faint">{s.scope}/</span>
                    {s.key}
                  </Link>
                </td>
                <td className={clsx("px-3 py-2 text-right whitespace-nowrap tabular-nums", flag ? "font-medium text-warn" : "")}>
                  {s.gapMs === null ? "—" : fmt(s.gapMs)}
                </td>
                <td className="px-5 py-2 font-mono text-[12px]">
                  <span className={otherSession ? "text-warn" : ""}>{s.session ?? "—"}</span>
                  {s.originalSession !== null && <span className="text-faint"> ← {s.originalSession}</span>}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
