import { readKeyAuditTrail } from "@/lib/audit/key-audit-trail";
import type { KeyRecord, KeyState } from "@/lib/idempotency/record";
import { stateOf } from "@/lib/idempotency/record";
import type { Runtime } from "@/lib/server/runtime";

export type TimelineEvent =
  | { type: "intent"; at: Date; executionId: string; token: number; session: string | null; caller: string | null; leaseUntil: Date; fallback: boolean }
  | { type: "outcome"; at: Date; executionId: string; outcome: string; durationMs: number | null; resultStatus: number | null; error: string | null }
  /** the decision that closed an execution without an outcome of its own (no duration: the call did not end then) */
  | { type: "closed"; at: Date; executionId: string; decision: string; note: string | null }
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
  // executions an operator's (or the reconciler's) release or resolve closed: that action says so
  // (the record it acted on names the reservation's fencing token, unique per key)
  const decided = new Set(actions.map((a) => tokenOf(a.stateBefore)).filter((t): t is number => t !== null));
  for (const e of executions) {
    timeline.push({ type: "intent", at: e.startedAt, executionId: e.id, token: Number(e.token), session: e.session, caller: e.caller, leaseUntil: e.leaseUntil, fallback: e.fallback });
    if (!e.outcome || !e.finishedAt) continue;
    if (!CLOSED.has(e.outcome)) {
      timeline.push({ type: "outcome", at: e.finishedAt, executionId: e.id, outcome: e.outcome, durationMs: e.durationMs, resultStatus: e.resultStatus, error: e.error });
      continue;
    }
    // closed by a decision: a call that had ended unknown keeps that outcome (its duration and note)
    const endedUnknown = e.durationMs !== null;
    if (endedUnknown) {
      const note = e.error?.startsWith(`${e.outcome}: `) ? null : e.error; // rows closed before the note was kept
      timeline.push({ type: "outcome", at: new Date(e.startedAt.getTime() + e.durationMs!), executionId: e.id, outcome: "unknown", durationMs: e.durationMs, resultStatus: null, error: note });
    }
    if (!decided.has(Number(e.token))) {
      timeline.push({ type: "closed", at: e.finishedAt, executionId: e.id, decision: e.outcome, note: endedUnknown ? null : e.error });
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

/** outcomes a decision gives an execution that had none, or an unknown one */
const CLOSED = new Set(["released", "resolved", "retried"]);

function tokenOf(state: unknown): number | null {
  const token = state && typeof state === "object" && "token" in state ? (state as { token: unknown }).token : null;
  return typeof token === "number" ? token : null;
}

function canProbe(runtime: Runtime, tool: string): boolean {
  if (!runtime.registry.has(tool)) return false;
  return runtime.registry.proberFor(runtime.registry.get(tool), runtime.db.prisma) !== null;
}
