import Link from "next/link";
import { JsonView } from "@/components/keys/json-view";
import { keyHref } from "@/lib/console/api";
import { formatTimestamp } from "@/lib/console/format";

export interface AuditRow {
  id: string;
  actor: string;
  action: string;
  scope: string | null;
  key: string | null;
  anomalyId: string | null;
  reason: string;
  stateBefore: unknown;
  stateAfter: unknown;
  at: string;
}

function summary(snapshot: unknown): string {
  if (snapshot === null || snapshot === undefined) return "—";
  if (typeof snapshot !== "object") return String(snapshot);
  const s = snapshot as Record<string, unknown>;
  if ("state" in s) return String(s.state);
  // anomaly status changes and reconciler passes
  if ("status" in s) return String(s.status);
  if ("flagged" in s) return `${s.flagged} flagged, ${s.created ?? 0} new`;
  if ("tokenId" in s) return `token ${String(s.tokenId).slice(0, 8)}`;
  if ("released" in s) return `${s.released} released, ${s.refused} refused${s.more ? ", more left" : ""}`;
  if ("selected" in s) return `${s.selected} selected`;
  if ("filter" in s) {
    const { state, ...f } = (s.filter ?? {}) as Record<string, string>;
    const parts = Object.entries(f).map(([k, v]) => `${k}=${v}`);
    return `${state ?? "stuck/unknown"} keys matching ${parts.length ? parts.join(", ") : "anything"}`;
  }
  return "…";
}

/** the token's public prefix that a token_create or token_revoke row keeps (never its secret) */
function tokenPrefix(snapshot: unknown): string {
  const prefix = snapshot && typeof snapshot === "object" ? (snapshot as Record<string, unknown>).prefix : undefined;
  return typeof prefix === "string" ? prefix : "";
}

export function AuditTable({ items }: { items: AuditRow[] }) {
  return (
    <div className="overflow-x-auto rounded-xl border border-line bg-surface shadow-xs">
      <table className="w-full min-w-[900px] text-[13px]" data-testid="audit-table">
        <thead>
          <tr className="border-b border-line text-left text-xs text-muted">
            <th scope="col" className="px-4 py-2 font-medium">When</th>
            <th scope="col" className="px-4 py-2 font-medium">Who</th>
            <th scope="col" className="px-4 py-2 font-medium">What</th>
            <th scope="col" className="px-4 py-2 font-medium">Target</th>
            <th scope="col" className="px-4 py-2 font-medium">Why</th>
            <th scope="col" className="px-4 py-2 font-medium">Before → after</th>
          </tr>
        </thead>
        <tbody className="divide-y divide-line align-top">
          {items.map((a) => (
            <tr key={a.id} data-testid="audit-row" data-action={a.action} data-actor={a.actor}>
              <td className="px-4 py-2.5 whitespace-nowrap text-muted"><time dateTime={a.at}>{formatTimestamp(a.at)}</time></td>
              <td className="px-4 py-2.5 whitespace-nowrap">{a.actor}</td>
              <td className="px-4 py-2.5 font-medium whitespace-nowrap capitalize">{a.action.replace(/_/g, " ")}</td>
              <td className="max-w-[16rem] px-4 py-2.5">
                {a.action.startsWith("token_") ? (
                  <Link href="/tokens" className="whitespace-nowrap text-accent hover:underline" data-testid="audit-token-target">
                    API token <span className="font-mono text-[12.5px]">{tokenPrefix(a.stateAfter)}…</span>
                  </Link>
                ) : a.anomalyId ? (
                  <Link href={`/anomalies/${encodeURIComponent(a.anomalyId)}`} className="font-mono text-[12.5px] text-accent hover:underline">anomaly {a.anomalyId.slice(0, 8)}</Link>
                ) : a.scope && a.key ? (
                  <Link href={keyHref(a.scope, a.key)} className="block truncate font-mono text-[12.5px] text-accent hover:underline" title={`${a.scope} / ${a.key}`}>
                    {a.key}
                  </Link>
                ) : (
                  <span className="text-muted">several keys</span>
                )}
                {a.scope && <div className="font-mono text-[11px] text-faint">{a.scope}</div>}
              </td>
              <td className="max-w-[20rem] px-4 py-2.5 break-words" data-testid="audit-reason">{a.reason}</td>
              <td className="px-4 py-2.5">
                <details>
                  <summary className="cursor-pointer whitespace-nowrap">
                    {summary(a.stateBefore)} → {summary(a.stateAfter)}
                  </summary>
                  <div className="grid min-w-[28rem] gap-2 md:grid-cols-2">
                    <JsonView value={a.stateBefore ?? null} />
                    <JsonView value={a.stateAfter ?? null} />
                  </div>
                </details>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
