import { readKeyAuditTrail } from "@/lib/audit/key-audit-trail";
import type { KeyRecord, KeyState } from "@/lib/idempotency/record";
import { stateOf } from "@/lib/idempotency/record";
import type { Runtime } from "@/lib/server/runtime";

export type TimelineEvent =
  | { type: "intent"; at: Date; executionId: string; token: number; session: string | null; caller: string | null; leaseUntil: Date; fallback: boolean }
  | { type: "outcome"; at: Date; executionId: string; outcome: string; durationMs: number | null; resultStatus: number | null; error: string | null }
  | { type: "suppression"; at: Date; kind: string; gapMs: number | null; session: string | null; caller: string | null; originalSession: string | null; fallback: boolean }
  | { type: "operator"; at: Date; action: string; actor: string; reason: string; before: unknown; after: unknown };

export interface KeyDetail {
  scope: string;
  key: string;
  record: KeyRecord | null;
  state: KeyState | "absent";
  /** the key's tool can be asked whether the call happened (a status probe): "Ask the tool" */
  probeable: boolean;
  /** oldest first */
  timeline: TimelineEvent[];
}

/** The record (with its result) and everything the audit log knows about the key, in one timeline. */
export async function getKeyDetail(runtime: Runtime, scope: string, key: string): Promise<KeyDetail> {
  const [record, { executions, suppressions, operatorActions: actions }] = await Promise.all([
    runtime.store.get(scope, key),
    readKeyAuditTrail(runtime.db.prisma, scope, key),
  ]);
  const timeline: TimelineEvent[] = [];
  for (const e of executions) {
    timeline.push({ type: "intent", at: e.startedAt, executionId: e.id, token: Number(e.token), session: e.session, caller: e.caller, leaseUntil: e.leaseUntil, fallback: e.fallback });
    if (e.outcome && e.finishedAt) {
      timeline.push({ type: "outcome", at: e.finishedAt, executionId: e.id, outcome: e.outcome, durationMs: e.durationMs, resultStatus: e.resultStatus, error: e.error });
    }
  }
  for (const s of suppressions) {
    timeline.push({ type: "suppression", at: s.at, kind: s.kind, gapMs: s.gapMs, session: s.session, caller: s.caller, originalSession: s.originalSession, fallback: s.fallback });
  }
  for (const a of actions) {
    timeline.push({ type: "operator", at: a.at, action: a.action, actor: a.actor, reason: a.reason, before: a.stateBefore, after: a.stateAfter });
  }
  timeline.sort((a, b) => a.at.getTime() - b.at.getTime());
  return { scope, key, record, state: record ? stateOf(record, Date.now()) : "absent", probeable: record ? canProbe(runtime, record.tool) : false, timeline };
}

function canProbe(runtime: Runtime, tool: string): boolean {
  if (!runtime.registry.has(tool)) return false;
  return runtime.registry.proberFor(runtime.registry.get(tool), runtime.db.prisma) !== null;
}
