import type { Prisma, PrismaClient } from "@/generated/prisma/client";
import { recordOperatorAction, requireReason } from "@/lib/audit/operator-actions";
import { InvalidStateError, NotFoundError } from "@/lib/idempotency/errors";
import type { DeliveryAttempt } from "./outbox";
import { LOG_ATTEMPTS } from "./outbox";
import type { WebhookEndpoint } from "./webhook-config";

/**
 * Sends a delivered or failed event to its endpoint again, as a new series of attempts on the same
 * row: the outbox keeps one row per (endpoint, event id), so the reconciler queuing the event again
 * still adds nothing, and a redelivery is that row due again with its attempt count back at 0 (the
 * endpoint's retries all over). The event and its id are unchanged, so a receiver that has it
 * already can drop it; each attempt is signed with a new timestamp. The log keeps the earlier
 * attempts, with a line saying who asked for the redelivery; the row's last answer is cleared, as
 * the new series has had none yet. A pending delivery is refused: it is
 * already being sent. Recorded in the operator trail with the actor and the reason.
 */
export async function redeliverDelivery(
  prisma: PrismaClient,
  input: { id: string; actor: string; reason: string; endpoints: readonly Pick<WebhookEndpoint, "name">[]; nowMs?: number },
): Promise<{ id: string; endpoint: string; eventId: string; previousStatus: string }> {
  const reason = requireReason(input.reason);
  const at = new Date(input.nowMs ?? Date.now());
  return prisma.$transaction(async (tx) => {
    const row = await tx.webhookDelivery.findUnique({ where: { id: input.id } });
    if (!row) throw new NotFoundError(`no webhook delivery ${input.id}`);
    if (!input.endpoints.some((e) => e.name === row.endpoint)) throw new InvalidStateError(`the endpoint ${row.endpoint} is no longer declared in the configuration file: nothing would send it`, null);
    const marker: DeliveryAttempt = { at: at.toISOString(), status: null, error: null, durationMs: 0, redeliveredBy: input.actor };
    const log = [...(Array.isArray(row.log) ? (row.log as unknown as DeliveryAttempt[]) : []), marker].slice(-LOG_ATTEMPTS);
    // only from a finished state: two operators clicking at once start one series, not two
    const out = await tx.webhookDelivery.updateMany({
      where: { id: row.id, status: { in: ["delivered", "failed"] } },
      data: { status: "pending", attempts: 0, nextAttemptAt: at, leaseOwner: null, leaseUntil: null, deliveredAt: null, lastStatus: null, lastError: null, lastAttemptAt: null, log: log as unknown as Prisma.InputJsonValue },
    });
    if (out.count !== 1) throw new InvalidStateError(`the delivery of event ${row.eventId} to ${row.endpoint} is still pending: it is being sent already`, null);
    await recordOperatorAction(tx, {
      actor: input.actor,
      action: "redeliver_webhook",
      reason,
      scope: (row.event as { data?: { scope?: string } })?.data?.scope ?? null,
      key: (row.event as { data?: { key?: string } })?.data?.key ?? null,
      before: { delivery: row.id, endpoint: row.endpoint, eventId: row.eventId, status: row.status, attempts: row.attempts },
      after: { delivery: row.id, endpoint: row.endpoint, eventId: row.eventId, status: "pending", attempts: 0 },
    });
    return { id: row.id, endpoint: row.endpoint, eventId: row.eventId, previousStatus: row.status };
  });
}
