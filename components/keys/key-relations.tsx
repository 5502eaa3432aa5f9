import Link from "next/link";
import { AnomalyStatusBadge } from "@/components/anomalies/status-badge";
import { anomalyHref, typeInfo } from "@/components/anomalies/anomaly-types";
import { formatTimestamp } from "@/lib/console/format";

export interface KeyRelationsProps {
  scope: string;
  keyName: string;
  /** the key's tool, when the store or the audit log names one */
  tool: string | null;
  anomalies: { id: string; type: string; status: string; summary: string; detectedAt: string }[];
  /** how many operator actions the audit trail holds about the key (capped) */
  auditCount: number;
  auditCap: number;
}

/** What else the console knows about a key: its tool's page, its anomalies, the audit rows about it. */
export function KeyRelations({ scope, keyName, tool, anomalies, auditCount, auditCap }: KeyRelationsProps) {
  const open = anomalies.filter((a) => a.status !== "resolved").length;
  const audit = `/audit?${new URLSearchParams({ scope, key: keyName })}`;
  return (
    <section aria-labelledby="related-heading" className="rounded-xl border border-line bg-surface px-5 py-4 shadow-xs" data-testid="key-relations">
      <h2 id="related-heading" className="text-xs font-medium tracking-wide text-muted uppercase">Related</h2>
      <dl className="mt-2 grid gap-x-6 gap-y-2 text-[13px] sm:grid-cols-[8rem_minmax(0,1fr)]">
        <dt className="text-muted">Tool</dt>
        <dd>
          {tool ? (
            <Link href={`/tools/${encodeURIComponent(tool)}`} className="font-mono text-[12.5px] text-accent hover:underline" data-testid="related-tool">{tool}</Link>
          ) : (
            <span className="text-faint">not known</span>
          )}
        </dd>
        <dt className="text-muted">Anomalies</dt>
        <dd data-testid="related-anomalies">
          {anomalies.length === 0 ? (
            <span className="text-faint">none flagged about this key</span>
          ) : (
            <>
              {open > 0 && <p className="mb-1 text-bad">{open} open</p>}
              <ul className="space-y-1">
                {anomalies.map((a) => (
                  <li key={a.id} className="flex flex-wrap items-center gap-2">
                    <AnomalyStatusBadge status={a.status} />
                    <Link href={anomalyHref(a.id)} className="text-accent hover:underline" data-testid="related-anomaly" title={a.summary}>
                      {typeInfo(a.type).label}
                    </Link>
                    <span className="text-xs text-muted">{formatTimestamp(a.detectedAt)}</span>
                  </li>
                ))}
              </ul>
            </>
          )}
        </dd>
        <dt className="text-muted">Audit trail</dt>
        <dd>
          {auditCount === 0 ? (
            <span className="text-faint">no operator action on this key</span>
          ) : (
            <Link href={audit} className="text-accent hover:underline" data-testid="related-audit">
              {auditCount >= auditCap ? `${auditCap}+` : auditCount} operator action{auditCount === 1 ? "" : "s"} on this key
            </Link>
          )}
        </dd>
      </dl>
    </section>
  );
}
