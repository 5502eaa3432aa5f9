import type { Execution, OperatorAction } from "@/generated/prisma/client";
import { readKeyAuditTrail } from "@/lib/audit/key-audit-trail";
import type { KeyRecord, KeyState } from "@/lib/idempotency/record";
import { stateOf } from "@/lib/idempotency/record";
import { redactAnswerText, redactText, redactValue } from "@/lib/idempotency/redaction";
import type { Runtime } from "@/lib/server/runtime";

export type TimelineEvent =
  | {
      type: "intent";
      at: Date;
      executionId: string;
      token: number;
      session: string | null;
      caller: string | null;
      leaseUntil: Date;
      fallback: boolean;
      /** the call's arguments as its execution kept them (redacted per the tool's policy); null: none kept */
      arguments: unknown;
      argumentsKept: "redacted" | "full" | null;
    }
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
  /** the arguments of the call the record stands for (else the key's latest execution), as kept */
  arguments: KeyArguments | null;
  /**
   * where "It happened" starts for a held key: a candidate result the tool's probe found for this
   * call, else its service's last answer when the outcome turned unknown; null when neither exists
   */
  prefill: ResultPrefill | null;
}

export interface KeyArguments {
  executionId: string;
  /** null: the tool keeps none (policy none), or the audit retention purged them */
  value: unknown;
  kept: "redacted" | "full" | null;
}

export interface ResultPrefill {
  source: "probe" | "upstream";
  status: number;
  /** the body as text: JSON when the answer was JSON, else what the service sent */
  body: string;
  at: Date;
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
    timeline.push({
      type: "intent",
      at: e.startedAt,
      executionId: e.id,
      token: Number(e.token),
      session: e.session,
      caller: e.caller,
      leaseUntil: e.leaseUntil,
      fallback: e.fallback,
      arguments: e.arguments ?? null,
      argumentsKept: keptOf(e.argumentsKept),
    });
    if (!e.outcome || !e.finishedAt) continue;
    if (!CLOSED.has(e.outcome)) {
      timeline.push({ type: "outcome", at: e.finishedAt, executionId: e.id, outcome: e.outcome, durationMs: e.durationMs, resultStatus: e.resultStatus, error: redactedNote(e.error) });
      continue;
    }
    // closed by a decision: a call that had ended unknown keeps that outcome (its duration and note)
    const endedUnknown = e.durationMs !== null;
    if (endedUnknown) {
      const note = e.error?.startsWith(`${e.outcome}: `) ? null : e.error; // rows closed before the note was kept
      timeline.push({ type: "outcome", at: new Date(e.startedAt.getTime() + e.durationMs!), executionId: e.id, outcome: "unknown", durationMs: e.durationMs, resultStatus: null, error: redactedNote(note) });
    }
    if (!decided.has(Number(e.token))) {
      timeline.push({ type: "closed", at: e.finishedAt, executionId: e.id, decision: e.outcome, note: endedUnknown ? null : redactedNote(e.error) });
    }
  }
  for (const s of suppressions) {
    timeline.push({ type: "suppression", at: s.at, kind: s.kind, gapMs: s.gapMs, session: s.session, caller: s.caller, originalSession: s.originalSession, fallback: s.fallback });
  }
  for (const a of actions) {
    // the records it acted on hold results, and a probe's answer: secrets in them are not shown
    timeline.push({ type: "operator", at: a.at, action: a.action, actor: a.actor, reason: a.reason, before: redactValue(a.stateBefore), after: redactValue(a.stateAfter) });
  }
  timeline.sort((a, b) => a.at.getTime() - b.at.getTime());
  // the trail is newest first: the record's own execution, else the latest
  const current = executions.find((e) => e.id === record?.executionId) ?? (record ? undefined : executions[0]);
  const state = record ? stateOf(record, Date.now()) : "absent";
  return {
    scope,
    key,
    record,
    state,
    probeable: record ? canProbe(runtime, record.tool) : false,
    timeline,
    arguments: current ? { executionId: current.id, value: current.arguments ?? null, kept: keptOf(current.argumentsKept) } : null,
    prefill: record && (state === "unknown" || state === "stuck") ? prefillFor(record, current, actions) : null,
  };
}

/** An outcome's note (an exception's or a service's message) without the secrets it may quote. */
function redactedNote(note: string | null): string | null {
  return note === null ? null : redactText(note);
}

function keptOf(kept: string | null): KeyArguments["kept"] {
  return kept === "redacted" || kept === "full" ? kept : null;
}

/**
 * A candidate result from the latest probe of this very call (the same reservation token), else the
 * service's answer its execution kept when the outcome turned unknown.
 */
function prefillFor(record: KeyRecord, execution: Execution | undefined, actions: OperatorAction[]): ResultPrefill | null {
  for (const a of actions) {
    const before = a.stateBefore as { token?: unknown } | null;
    const probe = (a.stateAfter as { probe?: { candidate?: { status?: unknown; body?: unknown } } } | null)?.probe;
    if (!probe?.candidate || before?.token !== record.token) continue;
    const status = typeof probe.candidate.status === "number" ? probe.candidate.status : 200;
    return { source: "probe", status, body: JSON.stringify(redactValue(probe.candidate.body ?? null), null, 2), at: a.at };
  }
  if (execution && execution.answerBody !== null && execution.answerStatus !== null) {
    return { source: "upstream", status: execution.answerStatus, body: prettyIfJson(redactAnswerText(execution.answerBody)), at: execution.finishedAt ?? execution.startedAt };
  }
  return null;
}

function prettyIfJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
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
