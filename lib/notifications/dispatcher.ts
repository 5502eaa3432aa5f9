import { randomUUID } from "node:crypto";
import os from "node:os";
import type { PrismaClient } from "@/generated/prisma/client";
import { deliverDue } from "./deliver";
import type { WebhookEndpoint } from "./webhook-config";

export interface Dispatcher {
  /** a round now (after the reconciler queued events), unless one is running */
  kick(): void;
  stop(): void;
}

/**
 * Delivers the outbox in the background: a round every `intervalMs` while any endpoint is declared,
 * never two at once in one process. A failing round is logged once per cause.
 */
export function startWebhookDispatcher(input: { prisma: PrismaClient; endpoints: () => readonly WebhookEndpoint[]; intervalMs: number; log?: (line: string) => void }): Dispatcher {
  const owner = `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  const log = input.log ?? ((line: string) => console.error(`idemgate: ${line}`));
  let running = false;
  let again = false;
  let lastFailure: string | null = null;
  const round = async () => {
    if (running) {
      again = true;
      return;
    }
    const endpoints = input.endpoints();
    if (endpoints.length === 0) return;
    running = true;
    try {
      do {
        again = false;
        const report = await deliverDue(input.prisma, endpoints, { owner, log });
        // a full batch: more may be due
        if (report.claimed >= 20) again = true;
      } while (again);
      lastFailure = null;
    } catch (err) {
      const message = (err as Error)?.message ?? String(err);
      if (message !== lastFailure) log(`webhook delivery failed (${message}); will try again`);
      lastFailure = message;
    } finally {
      running = false;
    }
  };
  const timer = input.intervalMs > 0 ? setInterval(() => void round(), input.intervalMs) : null;
  timer?.unref();
  return { kick: () => void round(), stop: () => timer && clearInterval(timer) };
}
