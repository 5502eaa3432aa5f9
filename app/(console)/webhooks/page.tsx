import type { Metadata } from "next";
import Link from "next/link";
import clsx from "clsx";
import { DeliveriesTable, EndpointList } from "@/components/webhooks/deliveries-table";
import { RefreshWhilePending } from "@/components/webhooks/refresh-while-pending";
import { requireOperator } from "@/lib/auth/require-operator";
import { can } from "@/lib/auth/roles";
import { endpointView, webhookEndpoints } from "@/lib/notifications/endpoints";
import { countDeliveries, DELIVERY_STATUSES, listDeliveries, type DeliveryStatus } from "@/lib/notifications/list-deliveries";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Webhooks" };

const PAGE_SIZE = 50;

function href(status: string | undefined, cursor?: string): string {
  const q = new URLSearchParams(Object.entries({ status, cursor }).filter(([, v]) => v) as [string, string][]).toString();
  return q ? `/webhooks?${q}` : "/webhooks";
}

export default async function WebhooksPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const operator = await requireOperator();
  const raw = await searchParams;
  const one = (k: string) => (Array.isArray(raw[k]) ? raw[k][0] : raw[k])?.trim() || undefined;
  const requested = one("status");
  const status = DELIVERY_STATUSES.find((s) => s === requested);
  const cursor = one("cursor");

  const { prisma } = (await getRuntime()).db;
  const [page, counts] = await Promise.all([
    listDeliveries(prisma, { status, limit: PAGE_SIZE, cursor }).catch(() => null),
    countDeliveries(prisma).catch(() => ({ pending: 0, delivered: 0, failed: 0 })),
  ]);
  const endpoints = webhookEndpoints().map(endpointView);
  const total = counts.pending + counts.delivered + counts.failed;

  return (
    <div className="space-y-6">
      <div>
        <h1 className="text-xl font-semibold tracking-tight">Webhooks</h1>
        <p className="mt-1 text-muted">
          Signed notifications when a key becomes unknown or stuck and when an anomaly opens, sent to the endpoints of the configuration file&apos;s{" "}
          <code className="font-mono text-[12.5px]">webhooks:</code>. <Link href="/docs/operate#webhooks" className="text-accent underline">How to verify them</Link>.
        </p>
      </div>

      <section className="space-y-2">
        <h2 className="text-xs font-medium tracking-wide text-muted uppercase">Endpoints</h2>
        {endpoints.length === 0 ? (
          <p data-testid="webhook-endpoints-none" className="rounded-xl border border-dashed border-line-strong px-6 py-6 text-[13px] text-muted">
            No endpoints: declare them under <code className="font-mono">webhooks:</code> in the file <code className="font-mono">IDEMGATE_CONFIG</code> names.
          </p>
        ) : (
          <EndpointList endpoints={endpoints} />
        )}
      </section>

      <section className="space-y-3">
        <div className="flex flex-wrap items-center justify-between gap-3">
          <h2 className="text-xs font-medium tracking-wide text-muted uppercase">Delivery log</h2>
          <RefreshWhilePending pending={counts.pending} />
          <nav aria-label="Delivery status" className="flex flex-wrap gap-1 text-[13px]">
            {[undefined, ...DELIVERY_STATUSES].map((s) => (
              <Link
                key={s ?? "all"}
                href={href(s)}
                aria-current={s === status ? "page" : undefined}
                className={clsx("rounded-md px-2.5 py-1", s === status ? "bg-surface-2 font-medium text-fg" : "text-muted hover:text-fg")}
              >
                {s ?? "all"} <span className="text-faint">{s ? counts[s as DeliveryStatus] : total}</span>
              </Link>
            ))}
          </nav>
        </div>
        {requested && !status && (
          <p role="alert" data-testid="delivery-status-unknown" className="rounded-lg border border-bad/30 bg-bad-soft px-4 py-3 text-[13px] text-bad">
            There is no delivery status “{requested}”: it is one of {DELIVERY_STATUSES.join(", ")}. Showing all.
          </p>
        )}
        {page === null ? (
          <p role="alert" className="rounded-lg border border-bad/30 bg-bad-soft px-4 py-3 text-[13px] text-bad">
            That page of the log could not be read (the cursor may be stale). <Link href={href(status)} className="underline">Start from the newest</Link>.
          </p>
        ) : page.items.length === 0 ? (
          <div data-testid="deliveries-empty" className="rounded-xl border border-dashed border-line-strong px-6 py-10 text-center text-[13px] text-muted">
            {status ? `No ${status} deliveries.` : "Nothing sent yet: events are queued when the reconciler finds an unknown or stuck key or opens an anomaly."}
          </div>
        ) : (
          <>
            <DeliveriesTable items={page.items} canRedeliver={can(operator.role, "redeliver")} />
            {(cursor || page.nextCursor) && (
              <div className="flex justify-between text-[13px]">
                {cursor ? <Link href={href(status)} className="text-accent underline">Newest</Link> : <span />}
                {page.nextCursor && <Link href={href(status, page.nextCursor)} className="text-accent underline">Older</Link>}
              </div>
            )}
          </>
        )}
      </section>
    </div>
  );
}
