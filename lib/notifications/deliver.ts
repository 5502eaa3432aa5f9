import type { PrismaClient } from "@/generated/prisma/client";
import { outboundFetch } from "@/lib/http/outbound-fetch";
import { renderEventBody } from "./events";
import { claimDueDeliveries, recordAttempt, type ClaimedDelivery } from "./outbox";
import { SIGNATURE_HEADER, signatureHeader } from "./signature";
import type { WebhookEndpoint } from "./webhook-config";

export interface DeliverOptions {
  /** this process's name on the leases it takes */
  owner: string;
  /** deliveries claimed per round (default 20) */
  limit?: number;
  fetch?: typeof fetch;
  log?: (line: string) => void;
}

export interface DeliverReport {
  claimed: number;
  delivered: number;
  retrying: number;
  failed: number;
  leaseLost: number;
}

/** A lease outlives the slowest attempt it covers by this much. */
const LEASE_MARGIN_MS = 30_000;

/** The headers of one attempt; the signature covers exactly `body`. */
export function deliveryHeaders(endpoint: WebhookEndpoint, delivery: Pick<ClaimedDelivery, "eventId" | "attempts" | "event">, body: string, nowMs: number = Date.now()): Record<string, string> {
  return {
    "content-type": "application/json",
    "user-agent": "Idemgate-Webhooks/1",
    [SIGNATURE_HEADER]: signatureHeader(endpoint.secret, body, nowMs),
    "Idemgate-Event-Id": delivery.eventId,
    "Idemgate-Event-Type": delivery.event.type,
    "Idemgate-Delivery-Attempt": String(delivery.attempts),
  };
}

/** An error's message without what it may quote of the URL (an incoming-webhook URL is itself a secret). */
function describeFailure(err: unknown, url: string): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e?.name === "TimeoutError") return "timed out";
  const text = e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
  return text.split(url).join("<url>").slice(0, 300);
}

/**
 * One round: claims the due deliveries of these endpoints, sends each (signed, with the endpoint's
 * timeout, no redirects followed) and records the answer. Two processes running rounds at once
 * claim different rows.
 */
export async function deliverDue(prisma: PrismaClient, endpoints: readonly WebhookEndpoint[], options: DeliverOptions): Promise<DeliverReport> {
  const report: DeliverReport = { claimed: 0, delivered: 0, retrying: 0, failed: 0, leaseLost: 0 };
  if (endpoints.length === 0) return report;
  const byName = new Map(endpoints.map((e) => [e.name, e]));
  const leaseMs = Math.max(...endpoints.map((e) => e.timeoutMs)) + LEASE_MARGIN_MS;
  const claimed = await claimDueDeliveries(prisma, { owner: options.owner, endpoints: [...byName.keys()], limit: options.limit ?? 20, leaseMs });
  report.claimed = claimed.length;
  const send = options.fetch ?? outboundFetch;
  await Promise.all(
    claimed.map(async (delivery) => {
      const endpoint = byName.get(delivery.endpoint)!;
      const body = renderEventBody(delivery.event, endpoint.format);
      const started = performance.now();
      let status: number | null = null;
      let error: string | null = null;
      try {
        const res = await send(endpoint.url, { method: "POST", headers: deliveryHeaders(endpoint, delivery, body), body, redirect: "manual", signal: AbortSignal.timeout(endpoint.timeoutMs) });
        status = res.status;
        if (status < 200 || status >= 300) error = `the endpoint answered ${status}`;
        await res.body?.cancel().catch(() => {});
      } catch (err) {
        error = describeFailure(err, endpoint.url);
      }
      const outcome = await recordAttempt(prisma, delivery, { owner: options.owner, endpoint, status, error, durationMs: Math.round(performance.now() - started) });
      if (outcome === "delivered") report.delivered++;
      else if (outcome === "retry") report.retrying++;
      else if (outcome === "failed") {
        report.failed++;
        options.log?.(`webhook ${endpoint.name}: gave up on event ${delivery.eventId} after ${delivery.attempts} attempts (${error})`);
      } else {
        report.leaseLost++;
        options.log?.(`webhook ${endpoint.name}: the lease on event ${delivery.eventId} ran out during its attempt; another process may send it again`);
      }
    }),
  );
  return report;
}
