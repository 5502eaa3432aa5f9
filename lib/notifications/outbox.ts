import { randomUUID } from "node:crypto";
import { Prisma, type PrismaClient } from "@/generated/prisma/client";
import type { WebhookEvent } from "./events";
import { backoffMs, type WebhookEndpoint } from "./webhook-config";

/** A client or an open transaction: events are queued in the transaction that opens their anomalies. */
type Db = Pick<PrismaClient, "webhookDelivery">;

/** One attempt, as the delivery log keeps it. */
export interface DeliveryAttempt {
  at: string;
  /** the endpoint's HTTP status; null when it did not answer */
  status: number | null;
  error: string | null;
  durationMs: number;
  /** not an attempt: an operator asked for the event to be sent again here, and the attempts restarted */
  redeliveredBy?: string;
}

/** The attempts a delivery keeps in its log (the newest). */
export const LOG_ATTEMPTS = 20;

/**
 * Queues each event for each endpoint that asked for its type: one row per (endpoint, event id), so
 * queuing the same event again (another process found the same thing) adds nothing.
 */
export async function enqueueEvents(db: Db, endpoints: readonly WebhookEndpoint[], events: readonly WebhookEvent[], nowMs: number = Date.now()): Promise<number> {
  const at = new Date(nowMs);
  const data = endpoints.flatMap((endpoint) =>
    events
      .filter((e) => endpoint.events.includes(e.type))
      .map((e) => ({ id: randomUUID(), endpoint: endpoint.name, eventId: e.id, eventType: e.type, event: e as unknown as Prisma.InputJsonValue, nextAttemptAt: at, createdAt: at })),
  );
  if (data.length === 0) return 0;
  const out = await db.webhookDelivery.createMany({ data, skipDuplicates: true });
  return out.count;
}

export interface ClaimedDelivery {
  id: string;
  endpoint: string;
  eventId: string;
  event: WebhookEvent;
  /** this attempt's number (1 for the first) */
  attempts: number;
  log: DeliveryAttempt[];
}

/**
 * Claims up to `limit` due deliveries for these endpoints with a lease: one statement that locks the
 * due rows it picks (FOR UPDATE SKIP LOCKED, so another process's claim passes them by instead of
 * waiting) and stamps them with this process's name and lease, counting the attempt. A row whose
 * lease is still running is not due, so two processes never both hold one; a process that died
 * holding one leaves it to be claimed again when its lease ends.
 */
export async function claimDueDeliveries(prisma: PrismaClient, input: { owner: string; endpoints: readonly string[]; limit: number; leaseMs: number; nowMs?: number }): Promise<ClaimedDelivery[]> {
  if (input.endpoints.length === 0) return [];
  const now = new Date(input.nowMs ?? Date.now());
  const leaseUntil = new Date(now.getTime() + input.leaseMs);
  const due = Prisma.sql`status = 'pending' AND next_attempt_at <= (${now}::timestamptz AT TIME ZONE 'UTC')
    AND (lease_until IS NULL OR lease_until <= (${now}::timestamptz AT TIME ZONE 'UTC')) AND endpoint IN (${Prisma.join([...input.endpoints])})`;
  return prisma.$queryRaw<ClaimedDelivery[]>`
    UPDATE webhook_deliveries SET lease_owner = ${input.owner}, lease_until = (${leaseUntil}::timestamptz AT TIME ZONE 'UTC'), attempts = attempts + 1
    WHERE id IN (SELECT id FROM webhook_deliveries WHERE ${due} ORDER BY next_attempt_at, id LIMIT ${input.limit} FOR UPDATE SKIP LOCKED) AND ${due}
    RETURNING id, endpoint, event_id AS "eventId", event, attempts, log`;
}

/**
 * Records an attempt's answer, only while this process still holds the lease: 2xx → delivered;
 * otherwise retried after the endpoint's backoff, or failed after its last attempt. Returns false
 * when the lease was lost (the row is someone else's now; nothing is written).
 */
export async function recordAttempt(
  prisma: PrismaClient,
  delivery: ClaimedDelivery,
  input: { owner: string; endpoint: Pick<WebhookEndpoint, "maxAttempts" | "retryBackoffMs">; status: number | null; error: string | null; durationMs: number; nowMs?: number },
): Promise<"delivered" | "retry" | "failed" | "lease_lost"> {
  const nowMs = input.nowMs ?? Date.now();
  const at = new Date(nowMs);
  const ok = input.status !== null && input.status >= 200 && input.status < 300;
  const outcome = ok ? "delivered" : delivery.attempts >= input.endpoint.maxAttempts ? "failed" : "retry";
  const attempt: DeliveryAttempt = { at: at.toISOString(), status: input.status, error: input.error, durationMs: input.durationMs };
  const log = [...(Array.isArray(delivery.log) ? delivery.log : []), attempt].slice(-LOG_ATTEMPTS);
  const out = await prisma.webhookDelivery.updateMany({
    where: { id: delivery.id, leaseOwner: input.owner, status: "pending" },
    data: {
      status: outcome === "retry" ? "pending" : outcome,
      leaseOwner: null,
      leaseUntil: null,
      lastStatus: input.status,
      lastError: input.error,
      lastAttemptAt: at,
      log: log as unknown as Prisma.InputJsonValue,
      deliveredAt: ok ? at : null,
      ...(outcome === "retry" ? { nextAttemptAt: new Date(nowMs + backoffMs(input.endpoint, delivery.attempts)) } : {}),
    },
  });
  return out.count === 1 ? outcome : "lease_lost";
}

/** Deletes finished deliveries (delivered or failed) queued before `olderThan`: the log keeps the audit log's retention. */
export async function purgeDeliveries(prisma: PrismaClient, olderThan: Date): Promise<number> {
  const out = await prisma.webhookDelivery.deleteMany({ where: { createdAt: { lt: olderThan }, status: { in: ["delivered", "failed"] } } });
  return out.count;
}
