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

function field(snapshot: unknown, name: string): unknown {
  return snapshot && typeof snapshot === "object" ? (snapshot as Record<string, unknown>)[name] : undefined;
}

function summary(snapshot: unknown): string {
  if (snapshot === null || snapshot === undefined) return "—";
  if (typeof snapshot !== "object") return String(snapshot);
  const s = snapshot as Record<string, unknown>;
  if ("state" in s) return String(s.state);
  // anomaly status changes and reconciler passes
  if ("status" in s && typeof s.status === "string") return s.status;
  // a call run from the console: the gateway's answer
  if ("status" in s) return `answered ${String(s.status)}${s.replayed ? " (replayed)" : ""}`;
  if ("flagged" in s) return `${s.flagged} flagged, ${s.created ?? 0} new`;
  if ("tokenId" in s) return `token ${String(s.tokenId).slice(0, 8)}`;
  if ("operatorId" in s) return `${String(s.email ?? "operator")}${s.sessionsEnded !== undefined ? `, ${s.sessionsEnded} sessions ended` : ""}`;
  if ("released" in s) return `${s.released} released, ${s.refused} refused${s.more ? ", more left" : ""}`;
  if ("selected" in s) return `${s.selected} selected`;
  if ("filter" in s) {
    const { state, ...f } = (s.filter ?? {}) as Record<string, string>;
    const parts = Object.entries(f).map(([k, v]) => `${k}=${v}`);
    return `${state ?? "stuck/unknown"} keys matching ${parts.length ? parts.join(", ") : "anything"}`;
  }
  return "…";
}

const mono = "font-mono text-[12.5px] break-all";

/** What the action touched, as links; long keys wrap rather than being cut. */
function Target({ a }: { a: AuditRow }) {
  let target: React.ReactNode;
  if (a.action.startsWith("token_")) {
    // the token's public prefix (never its secret)
    const prefix = field(a.stateAfter, "prefix");
    target = (
      <Link href="/tokens" className="text-accent hover:underline" data-testid="audit-token-target">
        API token <span className={mono}>{typeof prefix === "string" ? prefix : ""}…</span>
      </Link>
    );
  } else if (a.action === "invoke") {
    const tool = String(field(a.stateAfter, "tool") ?? "");
    target = (
      <span data-testid="audit-invoke-target">
        <Link href={`/tools/${encodeURIComponent(tool)}`} className="text-accent hover:underline">{tool}</Link>{" "}
        {a.scope && a.key ? (
          <Link href={keyHref(a.scope, a.key)} className={`${mono} text-accent hover:underline`}>{a.key}</Link>
        ) : (
          <span className="text-muted">without a key</span>
        )}
      </span>
    );
  } else if (a.anomalyId) {
    target = <Link href={`/anomalies/${encodeURIComponent(a.anomalyId)}`} className={`${mono} text-accent hover:underline`}>anomaly {a.anomalyId.slice(0, 8)}</Link>;
  } else if (a.scope && a.key) {
    target = <Link href={keyHref(a.scope, a.key)} className={`${mono} text-accent hover:underline`}>{a.key}</Link>;
  } else if (a.action.startsWith("operator_")) {
    target = <span>operator <span className="break-all">{String(field(a.stateAfter, "email") ?? "")}</span></span>;
  } else {
    target = <span className="text-muted">several keys</span>;
  }
  return (
    <>
      {target}
      {a.scope && <div className="font-mono text-[11px] break-all text-faint">{a.scope}</div>}
    </>
  );
}

function Change({ a }: { a: AuditRow }) {
  return (
    <details>
      <summary className="cursor-pointer">
        {summary(a.stateBefore)} → {summary(a.stateAfter)}
      </summary>
      <div className="mt-2 grid gap-2">
        <JsonView value={a.stateBefore ?? null} />
        <JsonView value={a.stateAfter ?? null} />
      </div>
    </details>
  );
}

const what = (action: string) => action.replace(/_/g, " ");

/** From the md breakpoint: a table whose columns share the width, none cut. */
function AuditTable({ items }: { items: AuditRow[] }) {
  return (
    <div className="hidden overflow-x-auto rounded-xl border border-line bg-surface shadow-xs md:block">
      <table className="w-full table-fixed text-[13px]" data-testid="audit-table">
        <colgroup>
          <col className="w-[11rem]" />
          <col className="w-[17%]" />
          <col className="w-[9%]" />
          <col className="w-[21%]" />
          <col />
          <col className="w-[15%]" />
        </colgroup>
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
              <td className="px-4 py-2.5 text-muted"><time dateTime={a.at}>{formatTimestamp(a.at)}</time></td>
              <td className="px-4 py-2.5 break-words">{a.actor}</td>
              <td className="px-4 py-2.5 font-medium capitalize">{what(a.action)}</td>
              <td className="px-4 py-2.5"><Target a={a} /></td>
              <td className="px-4 py-2.5 break-words" data-testid="audit-reason">{a.reason}</td>
              <td className="px-4 py-2.5 break-words"><Change a={a} /></td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Below the md breakpoint: one card per action. */
function AuditCards({ items }: { items: AuditRow[] }) {
  return (
    <ul className="divide-y divide-line rounded-xl border border-line bg-surface shadow-xs md:hidden" data-testid="audit-cards">
      {items.map((a) => (
        <li key={a.id} data-testid="audit-card" data-action={a.action} data-actor={a.actor} className="space-y-1.5 px-4 py-3 text-[13px]">
          <div className="flex items-baseline justify-between gap-3">
            <span className="font-medium capitalize">{what(a.action)}</span>
            <time dateTime={a.at} className="shrink-0 text-xs text-muted">{formatTimestamp(a.at)}</time>
          </div>
          <div><Target a={a} /></div>
          <p className="break-words">{a.reason}</p>
          <p className="text-xs break-all text-muted">by {a.actor}</p>
          <div className="text-xs"><Change a={a} /></div>
        </li>
      ))}
    </ul>
  );
}

export function AuditTrail({ items }: { items: AuditRow[] }) {
  return (
    <>
      <AuditTable items={items} />
      <AuditCards items={items} />
    </>
  );
}
