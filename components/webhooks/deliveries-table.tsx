import clsx from "clsx";
import Link from "next/link";
import { formatDuration, formatTimestamp } from "@/lib/console/format";
import type { EndpointView } from "@/lib/notifications/endpoints";
import type { DeliveryRow } from "@/lib/notifications/list-deliveries";
import { RedeliverButton } from "./redeliver-button";

const STATUS_CLASS: Record<DeliveryRow["status"], string> = {
  delivered: "bg-ok-soft text-ok",
  pending: "bg-warn-soft text-warn",
  failed: "bg-bad-soft text-bad",
};

function StatusBadge({ status }: { status: DeliveryRow["status"] }) {
  return <span className={clsx("inline-flex rounded-full px-2 py-0.5 text-[11px] font-medium", STATUS_CLASS[status])}>{status}</span>;
}

function lastAnswer(d: DeliveryRow): string {
  if (d.attempts === 0) return "not sent yet";
  return d.lastStatus !== null ? `HTTP ${d.lastStatus}` : (d.lastError ?? "no answer");
}

function Target({ d }: { d: DeliveryRow }) {
  return (
    <div className="min-w-0">
      {d.scope && d.key ? (
        <Link href={`/keys/${encodeURIComponent(d.scope)}/${encodeURIComponent(d.key)}`} className="block truncate font-mono text-[12.5px] text-accent hover:underline" title={`${d.scope} / ${d.key}`}>
          {d.key}
        </Link>
      ) : (
        <span className="font-mono text-[12.5px]">{d.tool}</span>
      )}
      {d.anomalyId && (
        <Link href={`/anomalies/${encodeURIComponent(d.anomalyId)}`} className="text-[11.5px] text-accent hover:underline">
          anomaly {d.anomalyId.slice(0, 8)}
        </Link>
      )}
    </div>
  );
}

function Attempts({ d }: { d: DeliveryRow }) {
  if (d.log.length === 0) return <span className="text-muted">{d.attempts === 0 ? "—" : d.attempts}</span>;
  return (
    <details>
      <summary className="cursor-pointer whitespace-nowrap">{d.attempts}</summary>
      <ol className="mt-1 space-y-0.5 text-[12px]" data-testid="delivery-attempts">
        {d.log.map((a, i) => (
          <li key={i} className="whitespace-nowrap" data-redelivery={a.redeliveredBy ? "true" : undefined}>
            <span className="text-muted">{formatTimestamp(a.at).slice(11)}</span>{" "}
            {a.redeliveredBy ? (
              <span className="text-muted">redelivery asked by {a.redeliveredBy}</span>
            ) : (
              <>
                {a.status !== null ? `HTTP ${a.status}` : a.error} · {formatDuration(a.durationMs)}
              </>
            )}
          </li>
        ))}
      </ol>
    </details>
  );
}

/** Only a finished delivery is sent again: a pending one is being sent already. */
function Redeliver({ d, can, className }: { d: DeliveryRow; can: boolean; className: string }) {
  if (!can || d.status === "pending") return null;
  return (
    <div className={className}>
      <RedeliverButton id={d.id} eventId={d.eventId} endpoint={d.endpoint} />
    </div>
  );
}

/** The delivery log: a table from md up, one card per delivery below; operators may send a finished delivery again. */
export function DeliveriesTable({ items, canRedeliver }: { items: DeliveryRow[]; canRedeliver: boolean }) {
  return (
    <>
      <div className="hidden overflow-x-auto rounded-xl border border-line bg-surface shadow-xs md:block">
        <table className="w-full table-fixed text-[13px]" data-testid="deliveries-table">
          <thead>
            <tr className="border-b border-line text-left text-xs text-muted">
              <th scope="col" className="w-28 px-4 py-2 font-medium">Queued</th>
              <th scope="col" className="w-28 px-4 py-2 font-medium">Endpoint</th>
              <th scope="col" className="w-44 px-4 py-2 font-medium">Event</th>
              <th scope="col" className="px-4 py-2 font-medium">About</th>
              <th scope="col" className="w-28 px-4 py-2 font-medium">Status</th>
              <th scope="col" className="w-24 px-4 py-2 font-medium">Attempts</th>
              <th scope="col" className="w-36 px-4 py-2 font-medium whitespace-nowrap">Last answer</th>
            </tr>
          </thead>
          <tbody className="divide-y divide-line align-top">
            {items.map((d) => (
              <tr key={d.id} data-testid="delivery-row" data-status={d.status} data-endpoint={d.endpoint} data-event-type={d.eventType}>
                <td className="px-4 py-2.5 whitespace-nowrap text-muted">
                  {/* date above time: the log fits 1024 px without scrolling */}
                  <time dateTime={d.createdAt}>
                    {formatTimestamp(d.createdAt).slice(0, 10)}
                    <span className="block text-[12px] text-faint">{formatTimestamp(d.createdAt).slice(11)}</span>
                  </time>
                </td>
                <td className="truncate px-4 py-2.5 font-medium" title={d.endpoint}>{d.endpoint}</td>
                <td className="px-4 py-2.5">
                  <div className="truncate font-medium">{d.eventType}</div>
                  {/* the whole id in its title: receivers deduplicate by it */}
                  <div className="truncate font-mono text-[11px] text-faint" title={`${d.eventId} (receivers deduplicate by this id)`}>{d.eventId}</div>
                </td>
                <td className="px-4 py-2.5">
                  <Target d={d} />
                </td>
                <td className="px-4 py-2.5">
                  <StatusBadge status={d.status} />
                  {d.deliveredAt && <div className="mt-0.5 text-[11px] whitespace-nowrap text-faint">{formatTimestamp(d.deliveredAt).slice(11)}</div>}
                  {d.nextAttemptAt && d.attempts > 0 && <div className="mt-0.5 text-[11px] whitespace-nowrap text-faint">next {formatTimestamp(d.nextAttemptAt).slice(11)}</div>}
                  <Redeliver d={d} can={canRedeliver} className="mt-1.5" />
                </td>
                <td className="px-4 py-2.5">
                  <Attempts d={d} />
                </td>
                <td className={clsx("px-4 py-2.5 break-words", d.lastStatus !== null && "truncate")}>{lastAnswer(d)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <ul className="space-y-3 md:hidden" data-testid="deliveries-cards">
        {items.map((d) => (
          <li key={d.id} className="rounded-xl border border-line bg-surface p-4 shadow-xs" data-testid="delivery-card" data-status={d.status}>
            <div className="flex items-start justify-between gap-3">
              <div className="min-w-0">
                <div className="font-medium">{d.eventType}</div>
                <div className="text-[12px] text-muted">
                  to <span className="font-medium text-fg">{d.endpoint}</span> · <time dateTime={d.createdAt}>{formatTimestamp(d.createdAt)}</time>
                </div>
              </div>
              <StatusBadge status={d.status} />
            </div>
            <div className="mt-2">
              <Target d={d} />
            </div>
            <dl className="mt-2 grid grid-cols-[auto_1fr] gap-x-3 gap-y-1 text-[12.5px]">
              <dt className="text-muted">Attempts</dt>
              <dd>
                <Attempts d={d} />
              </dd>
              <dt className="text-muted">Last answer</dt>
              <dd className="break-words">{lastAnswer(d)}</dd>
              <dt className="text-muted">Event id</dt>
              <dd className="font-mono text-[11.5px] break-all">{d.eventId}</dd>
            </dl>
            <Redeliver d={d} can={canRedeliver} className="mt-3" />
          </li>
        ))}
      </ul>
    </>
  );
}

/** The endpoints the configuration file declares: never the secret; parts of the URL from the environment masked. */
export function EndpointList({ endpoints }: { endpoints: EndpointView[] }) {
  return (
    <ul className="grid gap-3 md:grid-cols-2" data-testid="webhook-endpoints">
      {endpoints.map((e) => (
        <li key={e.name} className="min-w-0 rounded-xl border border-line bg-surface p-4 shadow-xs" data-testid="webhook-endpoint" data-name={e.name}>
          <div className="flex items-center justify-between gap-3">
            <span className="font-medium">{e.name}</span>
            <span className="rounded-full bg-surface-2 px-2 py-0.5 text-[11px] font-medium text-muted">{e.format === "slack" ? "Slack" : "Idemgate JSON"}</span>
          </div>
          <div className="mt-1 font-mono text-[12px] break-all text-muted" data-testid="webhook-endpoint-url">{e.url}</div>
          <dl className="mt-2 grid grid-cols-[auto_1fr] gap-x-3 gap-y-1 text-[12.5px]">
            <dt className="text-muted">Events</dt>
            <dd>{e.events.join(", ")}</dd>
            <dt className="text-muted">Secret</dt>
            <dd className="font-mono" data-testid="webhook-endpoint-secret">••••••••</dd>
            <dt className="text-muted">Retries</dt>
            <dd>
              up to {e.maxAttempts} attempts, {formatDuration(e.retryBackoffMs)} apart at first, doubling (at most 1 h); {formatDuration(e.timeoutMs)} timeout
            </dd>
          </dl>
        </li>
      ))}
    </ul>
  );
}
