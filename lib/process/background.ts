import { recordOperatorAction } from "@/lib/audit/operator-actions";
import { deleteOrphanCopies } from "@/lib/audit/argument-index";
import { purgeAuditRows } from "@/lib/audit/purge-audit";
import { purgeLoginFailures } from "@/lib/auth/login-limiter";
import { pauseOf } from "@/lib/idempotency/paused-tools";
import { describeError } from "@/lib/process/health";
import { probeKey } from "@/lib/operator/probe-key";
import { finishKeyDecisions } from "@/lib/operator/key-decisions";
import type { Runtime } from "@/lib/server/runtime";
import { webhookEndpoints } from "@/lib/notifications/endpoints";
import { eventsForOpenedAnomalies } from "@/lib/notifications/events";
import { enqueueEvents, purgeDeliveries } from "@/lib/notifications/outbox";
import { startWebhookDispatcher, type Dispatcher } from "@/lib/notifications/dispatcher";
import { indexMissingArgumentsAtStart, ProbeRotation, reconcile, RECONCILER_ACTOR, type ReconcileDeps, type ReconcileOptions, type ReconcileReport } from "@/lib/anomalies/reconcile";

/** Where probing continues, per key store: passes of one process take the held keys in turn. */
const rotations = new WeakMap<object, ProbeRotation>();

/** Argument copies the background checks for a left-behind one per pass (lib/audit/argument-index.ts). */
const ORPHAN_COPIES_PER_PASS = 2_000;

function rotationFor(store: object): ProbeRotation {
  let rotation = rotations.get(store);
  if (!rotation) rotations.set(store, (rotation = new ProbeRotation()));
  return rotation;
}

/** What the reconciler reads and asks, from the runtime: the tools' side effects and status probes. */
export function reconcileDeps(runtime: Pick<Runtime, "db" | "store" | "engine" | "registry">): ReconcileDeps {
  const { registry } = runtime;
  const db = runtime.db.prisma;
  const endpoints = webhookEndpoints();
  return {
    // the webhook outbox: events for what a pass opens, in the transaction that opens it
    onOpened: endpoints.length > 0 ? async (tx, opened) => void (await enqueueEvents(tx, endpoints, eventsForOpenedAnomalies(opened))) : undefined,
    prisma: db,
    store: runtime.store,
    engine: runtime.engine,
    finishDecisions: (before) => finishKeyDecisions(runtime, before),
    listEffects: (prisma, since) => registry.listEffects(prisma, since),
    probes: {
      // a paused tool whose probe resends the call is not asked: a resend is a new request to the
      // service (probeKey refuses it too); a status URL is only read, and is asked as usual
      tools: registry
        .list()
        .filter((tool) => tool.kind === "write" && registry.proberFor(tool, db) !== null)
        .filter((tool) => !(registry.probeResends(tool) && pauseOf(tool, runtime.engine.pausedTools) !== null))
        .map((tool) => tool.name),
      ask: (target, nowMs) => probeKey(runtime, { ...target, actor: RECONCILER_ACTOR, nowMs }),
      rotation: rotationFor(runtime.store),
    },
  };
}

/** The server's webhook dispatcher (null in a process that has none, as the command line). */
let dispatcher: Dispatcher | null = null;

/** One reconciler pass over the runtime's audit log and key store; the events it queued are sent at once. */
export async function reconcileRuntime(runtime: Runtime, options: ReconcileOptions = {}): Promise<ReconcileReport> {
  const report = await reconcile(reconcileDeps(runtime), options);
  if (report.created > 0) dispatcher?.kick();
  return report;
}

/** An operator asked for a pass from the console: run it and record who did. */
export async function reconcileOnDemand(runtime: Runtime, actor: string): Promise<ReconcileReport> {
  await runtime.audit.flush();
  const report = await reconcileRuntime(runtime);
  await recordOperatorAction(runtime.db.prisma, {
    actor,
    action: "reconcile",
    reason: "reconciler pass requested from the console",
    after: {
      flagged: report.flagged.length,
      created: report.created,
      backfilled: report.backfilled,
      restored: report.restored,
      finished: report.finished,
      settled: report.settled,
      probed: report.probed.length,
      resolved: report.probed.filter((p) => p.action === "resolved").length,
      released: report.probed.filter((p) => p.action === "released").length,
    },
  });
  return report;
}

/**
 * Inside the server: a reconciler pass and a purge of expired records every interval. Passes never
 * overlap; a failing pass is logged and the next one runs on time.
 */
export function startBackgroundJobs(runtime: Runtime): () => void {
  const interval = runtime.config.reconcileIntervalMs;
  // deliveries are retried on their own clock, whatever the reconciler's interval (events queued by
  // another process, or by an operator's pass, are delivered by any process)
  const webhooks = startWebhookDispatcher({ prisma: runtime.db.prisma, endpoints: webhookEndpoints, intervalMs: runtime.config.webhookPollMs });
  dispatcher = webhooks;
  const stopWebhooks = () => {
    webhooks.stop();
    if (dispatcher === webhooks) dispatcher = null;
  };
  // Once at start: the search's copies of kept arguments that a process stopped before writing
  // (lib/audit/argument-index.ts), from where the reconciler's scan stands (it may not have run for
  // long); each reconciler pass then reads the executions written since its previous one.
  void indexMissingArgumentsAtStart(runtime.db.prisma).then(
    (n) => n > 0 && console.log(`idemgate: ${n} executions' kept arguments made searchable again (their process stopped before it did)`),
    (err) => console.error(`idemgate: could not make kept arguments searchable at start (${describeError(err)}); the reconciler does it for recent executions`),
  );
  if (interval <= 0) return stopWebhooks;
  let running = false;
  let lastFailure: string | null = null;
  // where the sweep for argument copies left behind by retention goes on (a slice per pass)
  let copiesAfter = "";
  const timer = setInterval(async () => {
    if (running) return;
    running = true;
    try {
      await runtime.audit.flush();
      const report = await reconcileRuntime(runtime);
      // rare and worth a line: a process stopped half-way through a decision (key-decisions.ts)
      if (report.finished > 0) console.log(`idemgate: carried out ${report.finished} decision${report.finished === 1 ? "" : "s"} about held keys whose process stopped before recording them`);
      await runtime.store.purge(Date.now() - runtime.config.retentionMs, 1_000);
      await purgeAuditRows(runtime.db.prisma, new Date(Date.now() - runtime.config.auditRetentionMs));
      copiesAfter = (await deleteOrphanCopies(runtime.db.prisma, copiesAfter, ORPHAN_COPIES_PER_PASS)).next;
      await purgeDeliveries(runtime.db.prisma, new Date(Date.now() - runtime.config.auditRetentionMs));
      await purgeLoginFailures(runtime.db.prisma);
      if (lastFailure) console.error("idemgate: background reconcile/purge works again");
      lastFailure = null;
    } catch (err) {
      // said once per cause, not every interval while a store is down
      const message = describeError(err);
      if (message !== lastFailure) console.error(`idemgate: background reconcile/purge failed (${message}); will try again every ${interval} ms`);
      lastFailure = message;
    } finally {
      running = false;
    }
  }, interval);
  timer.unref();
  return () => {
    clearInterval(timer);
    stopWebhooks();
  };
}
