import type { Prisma } from "@/generated/prisma/client";
import { closeKeyAnomalies } from "@/lib/operator/close-key-anomalies";
import { recordSnapshot } from "@/lib/audit/operator-actions";
import { carryOutDecision, recordDecided, writeDecision } from "./key-decisions";
import { InvalidStateError, isIdemgateError, NotFoundError } from "@/lib/idempotency/errors";
import { FALLBACK_PREFIX } from "@/lib/idempotency/key-rules";
import { pauseOf, refusalOf } from "@/lib/idempotency/paused-tools";
import { stateOf, type KeyRecord } from "@/lib/idempotency/record";
import type { ProbeAnswer, ProbeContext, ProbeTool } from "@/lib/idempotency/tool";
import type { KeyRuntime } from "./release-key";
import { isResultStatus, resultTtlMs } from "./resolve-key";

/** How long a status probe may take before its answer counts as "cannot tell". */
export const PROBE_TIMEOUT_MS = 10_000;

export interface ProbeKeyResult {
  /** what the tool said */
  answer: ProbeAnswer;
  /** what was done with it: `none` when the tool cannot tell, or the key changed while it was asked */
  action: "resolved" | "released" | "none";
  /** the key's record now (null: released, or gone) */
  record: KeyRecord | null;
  /** the operator action that recorded the answer and the decision */
  actionId: string;
}

/**
 * Asks a stuck or unknown key's tool (its status probe) whether the call happened, and acts on the
 * answer: applied → the key is resolved with the tool's result; not applied → released, so the
 * next call runs; cannot tell → nothing changes. Every answer is recorded with the actor (an
 * operator, or the reconciler) and the tool's answer as evidence.
 * A key the key store lost while the audit log holds its call open is held again first
 * (Engine.restoreHeld), so it can be asked about.
 * @throws NotFoundError when the key has no record (nor an open call in the log); InvalidStateError when it is not stuck or
 * unknown, or its tool cannot be asked; ToolPausedError when its probe resends the call and the tool is paused
 * (UnavailableError while the paused tools are unread)
 */
export async function probeKey(
  runtime: KeyRuntime,
  input: { scope: string; key: string; actor: string; nowMs?: number; timeoutMs?: number },
): Promise<ProbeKeyResult> {
  const { scope, key, actor } = input;
  const prisma = runtime.db.prisma;
  // a key the store lost while the audit log holds its call open is held again first (as a retry would)
  const before = (await runtime.store.get(scope, key)) ?? (await runtime.engine.restoreHeld(scope, key, input.nowMs));
  if (!before) throw new NotFoundError(`there is no record under ${scope}/${key}`);
  const state = stateOf(before, input.nowMs ?? Date.now());
  if (state !== "stuck" && state !== "unknown") {
    throw new InvalidStateError(`only stuck or unknown keys are asked about; this key is ${state}`, before);
  }
  const tool = runtime.registry.has(before.tool) ? runtime.registry.get(before.tool) : null;
  const prober = tool ? runtime.registry.proberFor(tool, runtime.db.prisma) : null;
  if (!tool || !prober) {
    throw new InvalidStateError(
      `${before.tool} cannot be asked whether a call happened: it has no status probe (a statusUrl or a probe function); check the downstream system, then release or resolve the key`,
      before,
    );
  }
  // a resend is the call sent to the service again, which may apply it: refused while the tool is
  // paused, as a new call is (a status URL is only read, and is asked as usual)
  const pause = runtime.registry.probeResends(tool) ? pauseOf(tool, runtime.engine.pausedTools) : null;
  if (pause) throw refusalOf(pause);

  const answer = await ask(
    prober,
    { scope, key: await keyTheToolSaw(runtime, before), executionId: before.executionId, arguments: await keptArgumentsOf(runtime, before) },
    input.timeoutMs ?? PROBE_TIMEOUT_MS,
  );
  const said = describeAnswer(before.tool, answer);
  // the answer is about this reservation's call: a key taken by another call meanwhile is left alone
  const token = before.token;
  let action: ProbeKeyResult["action"] = "none";
  let record: KeyRecord | null = before;
  let refused: string | null = null;
  // the decision goes to the audit log before the key store acts on it (key-decisions.ts)
  let decided: string | null = null;
  try {
    if (answer.outcome === "applied") {
      const ttlMs = await resultTtlMs(runtime, scope, key);
      const reason = `${said}: resolved with its result`;
      decided = await writeDecision(runtime, { scope, key, decision: "resolved", actor, reason, result: { status: answer.status, body: answer.body, ttlMs } });
      record = (await carryOutDecision(prisma, decided, () => runtime.engine.resolve({ scope, key, token, actor, reason: said, result: answer.body, status: answer.status, ttlMs }))).after;
      action = "resolved";
    } else if (answer.outcome === "not_applied") {
      decided = await writeDecision(runtime, { scope, key, decision: "released", actor, reason: `${said}: released, so the next call runs it` });
      await carryOutDecision(prisma, decided, () => runtime.engine.release({ scope, key, token, actor, reason: said }));
      record = null;
      action = "released";
    }
  } catch (err) {
    // the key changed while the tool was asked (a late completion, an operator, another probe)
    if (!isIdemgateError(err, "invalid_state")) throw err;
    decided = null;
    refused = err.message;
    record = await runtime.store.get(scope, key);
  }

  const reason =
    action === "resolved"
      ? `${said}: resolved with its result`
      : action === "released"
        ? `${said}: released, so the next call runs it`
        : refused
          ? `${said}, but the key was left as it is: ${refused}`
          : `${said}: the key stays ${state}`;
  const actionId = await recordDecided(prisma, decided, {
    actor,
    action: action === "resolved" ? "resolve" : action === "released" ? "release" : "probe",
    reason,
    scope,
    key,
    before: recordSnapshot(before),
    after: { ...((recordSnapshot(record) as Record<string, unknown> | null) ?? { state: "absent" }), probe: answerEvidence(answer) },
  });
  if (action !== "none") await closeKeyAnomalies(prisma, { scope, key, actor, reason, decision: action });
  // null: the reconciler recorded the decision first (this process took longer than it waits)
  return { answer, action, record, actionId: actionId ?? "" };
}

/**
 * The key the tool received for the call a record stands for. A `fallback:` record is either a
 * keyless call's own key or the arguments window of a call under an advisory (model-minted) key,
 * which the tool never saw: it is asked about the key its call was sent with, from the audit log.
 * @throws InvalidStateError when the log does not (yet) say which call that was
 */
async function keyTheToolSaw(runtime: KeyRuntime, record: KeyRecord): Promise<string> {
  if (!record.key.startsWith(FALLBACK_PREFIX)) return record.key;
  const execution = record.executionId
    ? await runtime.db.prisma.execution.findUnique({ where: { id: record.executionId }, select: { scope: true, key: true } })
    : null;
  if (!execution || execution.scope !== record.scope) {
    throw new InvalidStateError("this arguments window's call is not in the audit log yet, so its tool cannot be asked about it; try again shortly, or decide its call's key", record);
  }
  return execution.key;
}

/** The arguments the call's execution kept (redacted as its tool keeps them), for its probe; null when none are kept. */
async function keptArgumentsOf(runtime: KeyRuntime, record: KeyRecord): Promise<unknown> {
  if (!record.executionId) return null;
  const execution = await runtime.db.prisma.execution.findUnique({ where: { id: record.executionId }, select: { scope: true, arguments: true } });
  // never another tenant's: the execution must be this key's scope's
  return execution && execution.scope === record.scope ? (execution.arguments ?? null) : null;
}

/**
 * The probe's answer, within the timeout. A probe that throws, hangs or answers something that is
 * not an answer cannot tell: only the tool's own word resolves or releases a key.
 */
async function ask(prober: ProbeTool, ctx: Omit<ProbeContext, "signal">, timeoutMs: number): Promise<ProbeAnswer> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<ProbeAnswer>((resolve) => {
    timer = setTimeout(() => {
      controller.abort();
      resolve({ outcome: "unknown", note: `the tool did not answer within ${timeoutMs} ms` });
    }, timeoutMs);
  });
  const asked = prober({ ...ctx, signal: controller.signal }).then(checkAnswer, (err: unknown) => ({
    outcome: "unknown" as const,
    note: `the status probe failed: ${err instanceof Error ? err.message : String(err)}`,
  }));
  try {
    return await Promise.race([asked, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

function checkAnswer(answer: unknown): ProbeAnswer {
  const a = answer as Partial<ProbeAnswer> | null;
  switch (a?.outcome) {
    case "applied": {
      const status = (a as { status?: unknown }).status ?? 200;
      if (typeof status !== "number" || !isResultStatus(status)) {
        return { outcome: "unknown", note: `the status probe answered applied with status ${String(status)}, which is not a result (200 to 499)` };
      }
      return { outcome: "applied", status, body: (a as { body?: unknown }).body ?? null };
    }
    case "not_applied":
      return { outcome: "not_applied" };
    case "unknown": {
      const note = (a as { note?: unknown }).note;
      const candidate = (a as { candidate?: { status?: unknown; body?: unknown } }).candidate;
      const status = candidate?.status ?? 200;
      const found = candidate && typeof candidate === "object" && typeof status === "number" && isResultStatus(status) ? { candidate: { status, body: candidate.body ?? null } } : {};
      return typeof note === "string" && note !== "" ? { outcome: "unknown", note, ...found } : { outcome: "unknown", ...found };
    }
    default:
      return { outcome: "unknown", note: "the status probe's answer has no valid outcome" };
  }
}

function describeAnswer(tool: string, answer: ProbeAnswer): string {
  switch (answer.outcome) {
    case "applied":
      return `${tool} answered its status probe: applied (HTTP ${answer.status})`;
    case "not_applied":
      return `${tool} answered its status probe: not applied`;
    case "unknown":
      return `${tool} answered its status probe: cannot tell${answer.note ? ` (${answer.note})` : ""}`;
  }
}

/** The answer as the trail keeps it; an applied answer's body is the key's result now, kept there. */
function answerEvidence(answer: ProbeAnswer) {
  switch (answer.outcome) {
    case "applied":
      return { outcome: answer.outcome, status: answer.status };
    case "not_applied":
      return { outcome: answer.outcome };
    case "unknown":
      // a candidate result is kept: what an operator resolving the key starts from ("It happened")
      return { outcome: answer.outcome, note: answer.note ?? null, ...(answer.candidate ? { candidate: answer.candidate as Prisma.InputJsonValue } : {}) };
  }
}
