import type { PrismaClient } from "@/generated/prisma/client";
import type { WebhookEvent } from "./events";
import type { DeliveryAttempt } from "./outbox";

export const DELIVERY_STATUSES = ["pending", "delivered", "failed"] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** One row of the console's delivery log (times as ISO strings: it crosses to client components). */
export interface DeliveryRow {
  id: string;
  endpoint: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: string | null;
  lastStatus: number | null;
  lastError: string | null;
  lastAttemptAt: string | null;
  createdAt: string;
  deliveredAt: string | null;
  summary: string;
  tool: string;
  scope: string | null;
  key: string | null;
  anomalyId: string | null;
  log: DeliveryAttempt[];
}

export interface DeliveryQuery {
  status?: DeliveryStatus;
  endpoint?: string;
  limit: number;
  /** the last row's id of the previous page */
  cursor?: string | null;
}

/** Newest first (by when the event was queued, ties by id), `limit` a page, with the cursor of the next. */
export async function listDeliveries(prisma: PrismaClient, q: DeliveryQuery): Promise<{ items: DeliveryRow[]; nextCursor: string | null }> {
  const rows = await prisma.webhookDelivery.findMany({
    where: { status: q.status, endpoint: q.endpoint },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: q.limit + 1,
    ...(q.cursor ? { cursor: { id: q.cursor }, skip: 1 } : {}),
  });
  const items = rows.slice(0, q.limit).map((r): DeliveryRow => {
    const event = r.event as unknown as WebhookEvent;
    return {
      id: r.id,
      endpoint: r.endpoint,
      eventId: r.eventId,
      eventType: r.eventType,
      status: r.status as DeliveryStatus,
      attempts: r.attempts,
      nextAttemptAt: r.status === "pending" ? r.nextAttemptAt.toISOString() : null,
      lastStatus: r.lastStatus,
      lastError: r.lastError,
      lastAttemptAt: r.lastAttemptAt?.toISOString() ?? null,
      createdAt: r.createdAt.toISOString(),
      deliveredAt: r.deliveredAt?.toISOString() ?? null,
      summary: event?.data?.summary ?? "",
      tool: event?.data?.tool ?? "",
      scope: event?.data?.scope ?? null,
      key: event?.data?.key ?? null,
      anomalyId: event?.data?.anomaly?.id ?? null,
      log: Array.isArray(r.log) ? (r.log as unknown as DeliveryAttempt[]) : [],
    };
  });
  return { items, nextCursor: rows.length > q.limit ? items[items.length - 1].id : null };
}

/** Deliveries per status, for the page's filter. */
export async function countDeliveries(prisma: PrismaClient): Promise<Record<DeliveryStatus, number>> {
  const groups = await prisma.webhookDelivery.groupBy({ by: ["status"], _count: { _all: true } });
  const out: Record<DeliveryStatus, number> = { pending: 0, delivered: 0, failed: 0 };
  for (const g of groups) if (g.status in out) out[g.status as DeliveryStatus] = g._count._all;
  return out;
}
