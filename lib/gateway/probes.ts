import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { Execution } from "@/generated/prisma/client";
import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import { recordOperatorAction, recordSnapshot } from "@/lib/audit/operator-actions";
import { ExecutionNotFoundError, InvalidCursorError, isIdemgateError } from "@/lib/idempotency/errors";
import { FALLBACK_PREFIX } from "@/lib/idempotency/key-rules";
import { stateOf, type KeyRecord } from "@/lib/idempotency/record";
import type { HttpAnswer } from "@/lib/http/answer";
import { badRequest, LeaseRunningError, NotHeldError, ProbeClaimedError } from "@/lib/http/problem";
import { closeKeyAnomalies } from "@/lib/operator/close-key-anomalies";
import { carryOutDecision, recordDecided, writeDecision } from "@/lib/operator/key-decisions";
import { cursorSeal } from "@/lib/operator/list-cursor";
import { resultTtlMs } from "@/lib/operator/resolve-key";
import type { Runtime } from "@/lib/server/runtime";
import { parsedBody, type GatewayRequest } from "./gateway-request";

// Probes of held calls of tools that run in their caller's process (DESIGN.md § "Tools that run
// where they live", "Probes where the tool lives"): only the application can ask its provider
// whether such a call happened. Its resolver lists its tools' held calls, claims one at a time
// (a claim shared by every server process: a column of the call's execution row), and answers
// applied (the key is done with the result), not applied (released) or still unknown (asked again
// after a backoff). Every answer is fenced by the execution's token and recorded as the probe's.

const JSON_HEADERS = { "Content-Type": "application/json", "Cache-Control": "no-store" };
const EXECUTION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** How long a claim lasts unless the resolver asks for another (it answers well within it). */
export const DEFAULT_CLAIM_MS = 30_000;
export const MIN_CLAIM_MS = 1_000;
export const MAX_CLAIM_MS = 300_000;
/** After an "unknown" answer the call is not claimed again for 5 s · 2^(attempts-1), at most 5 min. */
export const PROBE_BACKOFF_BASE_MS = 5_000;
export const PROBE_BACKOFF_MAX_MS = 300_000;

const HELD = ["unknown", "stuck"] as const;
type HeldState = (typeof HELD)[number];

export const claimBody = z.strictObject({
  holder: z.string().min(1).max(200).optional().describe("which process claims (host:pid, a pod name): recorded with its answer"),
  leaseMs: z.number().int().min(MIN_CLAIM_MS).max(MAX_CLAIM_MS).optional().describe(`how long the claim lasts (default ${DEFAULT_CLAIM_MS})`),
});

const claimId = z.string().uuid().describe("from the claim's answer");
export const answerBody = z.discriminatedUnion("outcome", [
  z.strictObject({
    claim: claimId,
    outcome: z.literal("applied"),
    status: z.number().int().min(200).max(499).optional().describe("200 unless given; 400–499: a final error, stored and replayed like a result"),
    body: z.unknown().describe("the result to store, any JSON; replayed to every retry"),
  }),
  z.strictObject({ claim: claimId, outcome: z.literal("not_applied"), note: z.string().max(1_000).optional() }),
  z.strictObject({ claim: claimId, outcome: z.literal("unknown"), note: z.string().max(1_000).optional() }),
]);

/** A held call as the probe API shows it. */
export interface HeldCall {
  executionId: string;
  tool: string;
  key: string;
  scope: string;
  state: HeldState;
  startedAt: string;
  leaseUntil: string | null;
  leaseEnded: boolean;
  note: string | null;
  arguments: unknown;
  argumentsKept: string | null;
  probe: { attempts: number; claimedUntil: string | null; nextProbeAt: string | null; lastNote: string | null };
}

type ExecutionRow = Pick<Execution, "id" | "scope" | "key" | "tool" | "token" | "startedAt" | "leaseUntil" | "arguments" | "argumentsKept" | "probeClaim" | "probeHolder" | "probeUntil" | "probeAttempts" | "probeNote">;
const ROW_SELECT = {
  id: true, scope: true, key: true, tool: true, token: true, startedAt: true, leaseUntil: true, arguments: true, argumentsKept: true,
  probeClaim: true, probeHolder: true, probeUntil: true, probeAttempts: true, probeNote: true,
} as const;

function heldCall(record: KeyRecord, row: ExecutionRow, state: HeldState, nowMs: number): HeldCall {
  const until = row.probeUntil && row.probeUntil.getTime() > nowMs ? row.probeUntil.toISOString() : null;
  const leaseUntilMs = record.leaseUntilMs ?? row.leaseUntil.getTime();
  return {
    executionId: row.id,
    tool: record.tool,
    key: record.key,
    scope: record.scope,
    state,
    startedAt: row.startedAt.toISOString(),
    leaseUntil: new Date(leaseUntilMs).toISOString(),
    leaseEnded: leaseUntilMs <= nowMs,
    note: record.status === "unknown" ? record.outcomeNote : null,
    arguments: row.arguments ?? null,
    argumentsKept: row.argumentsKept,
    probe: { attempts: row.probeAttempts, claimedUntil: until && row.probeClaim ? until : null, nextProbeAt: until, lastNote: row.probeNote },
  };
}

/**
 * The state of a record still held by the call `row` stands for, or null when it is not (decided,
 * released, taken over). The record names its execution: a call held again from the audit log after
 * a key-store loss keeps its execution under a new reservation token, and a takeover is another
 * execution. Decisions then act on the record's token as read (Engine.resolve / release are fenced
 * by it), so a key that changes meanwhile is refused, never decided for another call.
 */
function heldBy(record: KeyRecord | null, row: ExecutionRow, nowMs: number): HeldState | null {
  if (!record || record.executionId !== row.id) return null;
  const state = stateOf(record, nowMs);
  return state === "unknown" || state === "stuck" ? state : null;
}

/** GET /api/v1/tools/{tool}/held: the token's scope's held calls of a client-run tool, unknown first, then stuck. */
export async function listHeldCalls(request: GatewayRequest, toolName: string, principal: TokenPrincipal, runtime: Runtime): Promise<HttpAnswer> {
  const query = request.query();
  const tool = runtime.registry.get(toolName);
  if (tool.runs !== "client") {
    throw badRequest("invalid_request", `${tool.name} is run by Idemgate, not by its caller: its held calls are probed by the server's reconciler (a statusUrl or a probe function)`);
  }
  const rawLimit = query.get("limit");
  const limit = rawLimit === null ? 50 : Number(rawLimit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw badRequest("invalid_request", "limit: an integer from 1 to 100");
  const filter = { scope: principal.scope, tool: tool.name, state: "held" };
  const seal = cursorSeal(runtime.config);
  let position: { state: HeldState; cursor: string | null } = { state: "unknown", cursor: null };
  const rawCursor = query.get("cursor");
  if (rawCursor) {
    try {
      const opened = JSON.parse(seal.open(rawCursor, filter)) as { state?: unknown; cursor?: unknown };
      if (!HELD.includes(opened.state as HeldState) || (opened.cursor !== null && typeof opened.cursor !== "string")) throw new InvalidCursorError();
      position = { state: opened.state as HeldState, cursor: opened.cursor as string | null };
    } catch (err) {
      if (isIdemgateError(err)) throw err;
      throw new InvalidCursorError();
    }
  }
  const nowMs = Date.now();
  const page = await runtime.store.list({ state: position.state, tool: tool.name, scope: principal.scope, limit, cursor: position.cursor, nowMs });
  const records = page.items.filter((r) => r.executionId !== null && !r.key.startsWith(FALLBACK_PREFIX));
  const rows = records.length
    ? await runtime.db.prisma.execution.findMany({ where: { id: { in: records.map((r) => r.executionId!) }, scope: principal.scope }, select: ROW_SELECT })
    : [];
  const byId = new Map(rows.map((r) => [r.id, r]));
  const items: HeldCall[] = [];
  for (const record of records) {
    const row = byId.get(record.executionId!);
    const state = row ? heldBy(record, row, nowMs) : null;
    if (row && state) items.push(heldCall(record, row, state, nowMs));
  }
  let next: { state: HeldState; cursor: string | null } | null = page.nextCursor ? { state: position.state, cursor: page.nextCursor } : null;
  if (!next && position.state === "unknown") next = { state: "stuck", cursor: null };
  const nextCursor = next ? seal.seal(JSON.stringify(next), filter) : null;
  return { status: 200, headers: JSON_HEADERS, body: JSON.stringify({ items, nextCursor }) };
}

/** The execution `executionId` of the token's scope; another scope's is not found, as one that does not exist. */
async function executionOf(executionId: string, principal: TokenPrincipal, runtime: Runtime): Promise<ExecutionRow> {
  if (!EXECUTION_ID.test(executionId)) throw new ExecutionNotFoundError();
  const row = await runtime.db.prisma.execution.findUnique({ where: { id: executionId }, select: ROW_SELECT });
  if (!row || row.scope !== principal.scope) throw new ExecutionNotFoundError();
  return row;
}

/**
 * The key's record. A key the key store lost is not held again from the log here: the reconciler
 * does that (its held-calls pass), and doing it here would race a decision that has just released
 * the key and not yet closed its execution in the log, holding the key again.
 */
async function recordOf(row: ExecutionRow, runtime: Runtime): Promise<KeyRecord | null> {
  return runtime.store.get(row.scope, row.key);
}

const notHeld = (detail: string) => new NotHeldError(detail);

function claimedUntil(until: Date, nowMs: number, detail: string): ProbeClaimedError {
  return new ProbeClaimedError(detail, until.getTime(), nowMs);
}

/** POST /api/v1/executions/{executionId}/probe/claim */
export async function claimProbe(request: GatewayRequest, executionId: string, principal: TokenPrincipal, runtime: Runtime): Promise<HttpAnswer> {
  const raw = await request.json();
  const body = parsedBody(claimBody, raw, "claim");
  const row = await executionOf(executionId, principal, runtime);
  const nowMs = Date.now();
  const record = await recordOf(row, runtime);
  const state = heldBy(record, row, nowMs);
  if (!record || !state) throw notHeld("this call is not held any more: it was completed, released, decided, or a newer call holds its key");
  const tool = runtime.registry.has(row.tool) ? runtime.registry.get(row.tool) : null;
  if (!tool || tool.runs !== "client") throw badRequest("invalid_request", `${row.tool} is not a tool run by its caller: the server's reconciler probes its calls`);
  const claim = randomUUID();
  const leaseMs = body.leaseMs ?? DEFAULT_CLAIM_MS;
  const now = new Date(nowMs);
  const until = new Date(nowMs + leaseMs);
  // one live claim per execution, whichever server process is asked: a conditional update of its row
  const taken = await runtime.db.prisma.execution.updateMany({
    where: { id: row.id, scope: principal.scope, OR: [{ probeUntil: null }, { probeUntil: { lte: now } }] },
    data: { probeClaim: claim, probeHolder: body.holder ?? null, probeUntil: until },
  });
  if (taken.count === 0) {
    const current = await runtime.db.prisma.execution.findUnique({ where: { id: row.id }, select: { probeUntil: true, probeClaim: true } });
    const at = current?.probeUntil ?? until;
    throw claimedUntil(
      at,
      nowMs,
      current?.probeClaim
        ? `another process is probing this call (its claim lasts until ${at.toISOString()})`
        : `this call's last probe could not tell; it is asked again from ${at.toISOString()}`,
    );
  }
  const call = heldCall(record, { ...row, probeClaim: claim, probeHolder: body.holder ?? null, probeUntil: until }, state, nowMs);
  return { status: 200, headers: JSON_HEADERS, body: JSON.stringify({ claim, claimedUntil: until.toISOString(), claimMs: leaseMs, call }) };
}

/** How the trail names a probe: the token it came with and the process that ran it, never an operator. */
export function probeActor(tokenId: string, holder: string | null): string {
  return `probe:token:${tokenId}@${holder ?? "unnamed"}`;
}

/** POST /api/v1/executions/{executionId}/probe/answer */
export async function answerProbe(request: GatewayRequest, executionId: string, principal: TokenPrincipal, runtime: Runtime): Promise<HttpAnswer> {
  const raw = await request.json();
  const body = parsedBody(answerBody, raw, "answer");
  if (body.outcome === "applied" && (typeof raw !== "object" || raw === null || !Object.hasOwn(raw, "body"))) {
    throw badRequest("invalid_request", "invalid answer body: body: the result is required for applied (null for none)");
  }
  const row = await executionOf(executionId, principal, runtime);
  const prisma = runtime.db.prisma;
  const nowMs = Date.now();
  if (row.probeClaim !== body.claim) {
    throw claimedUntil(row.probeUntil ?? new Date(nowMs), nowMs, "this claim is not the call's claim any more: it lapsed and another process claimed the call; nothing changed");
  }
  const actor = probeActor(principal.tokenId, row.probeHolder);
  const { scope, key, tool } = row;
  const said = describe(tool, body);
  const record = await recordOf(row, runtime);
  const state = heldBy(record, row, nowMs);
  const evidence = answerEvidence(body);

  const late = async (why: string): Promise<never> => {
    await prisma.execution.updateMany({ where: { id: row.id, probeClaim: body.claim }, data: { probeClaim: null, probeUntil: null } });
    const current = await runtime.store.get(scope, key);
    await recordOperatorAction(prisma, {
      actor,
      action: "probe_late",
      reason: `late answer: ${said}; ${why}`,
      scope,
      key,
      before: recordSnapshot(record),
      after: { ...((recordSnapshot(current) as Record<string, unknown> | null) ?? { state: "absent" }), probe: evidence, executionId: row.id },
    });
    throw notHeld(`this call is not held any more (${why}); nothing changed, the answer is kept in the audit trail as a late answer`);
  };
  if (!record || !state) return late("it was decided, completed or released before the answer came, or a newer call holds its key");

  const token = record.token;
  if (body.outcome === "unknown") {
    const attempts = row.probeAttempts + 1;
    const next = new Date(nowMs + Math.min(PROBE_BACKOFF_MAX_MS, PROBE_BACKOFF_BASE_MS * 2 ** (attempts - 1)));
    await prisma.execution.updateMany({
      where: { id: row.id, probeClaim: body.claim },
      data: { probeClaim: null, probeUntil: next, probeAttempts: attempts, probeNote: body.note ?? null },
    });
    await recordOperatorAction(prisma, {
      actor,
      action: "probe",
      reason: `${said}: the key stays ${state}`,
      scope,
      key,
      before: recordSnapshot(record),
      after: { ...(recordSnapshot(record) as Record<string, unknown>), probe: evidence, executionId: row.id },
    });
    return { status: 200, headers: JSON_HEADERS, body: JSON.stringify({ decision: "none", state, nextProbeAt: next.toISOString() }) };
  }

  let after: KeyRecord | null = null;
  let decision: "resolved" | "released";
  let reason: string;
  // the decision goes to the audit log before the key store acts on it (lib/operator/key-decisions.ts)
  let decided: string | null = null;
  try {
    if (body.outcome === "applied") {
      const ttlMs = await resultTtlMs(runtime, scope, key);
      const status = body.status ?? 200;
      reason = `${said}: resolved with its result`;
      decided = await writeDecision(runtime, { scope, key, decision: "resolved", actor, reason, result: { status, body: body.body ?? null, ttlMs } });
      after = (await carryOutDecision(prisma, decided, () => runtime.engine.resolve({ scope, key, token, actor, reason: said, result: body.body ?? null, status, ttlMs }))).after;
      decision = "resolved";
    } else {
      const leaseUntilMs = record.leaseUntilMs ?? row.leaseUntil.getTime();
      if (leaseUntilMs > nowMs) {
        throw new LeaseRunningError(
          `this call's lease lasts until ${new Date(leaseUntilMs).toISOString()}: it may still be running, so "not applied" cannot free its key yet; answer again after that, or answer unknown`,
          leaseUntilMs,
          nowMs,
        );
      }
      reason = `${said}: released, so the next call runs it`;
      decided = await writeDecision(runtime, { scope, key, decision: "released", actor, reason });
      await carryOutDecision(prisma, decided, () => runtime.engine.release({ scope, key, token, actor, reason: said }));
      decision = "released";
    }
  } catch (err) {
    // the key changed since it was read (an operator, another probe, its own late completion)
    if (!isIdemgateError(err, "invalid_state")) throw err;
    return late(err.message);
  }
  await prisma.execution.updateMany({ where: { id: row.id }, data: { probeClaim: null, probeUntil: null } });
  await recordDecided(prisma, decided, {
    actor,
    action: decision === "resolved" ? "resolve" : "release",
    reason,
    scope,
    key,
    before: recordSnapshot(record),
    after: { ...((recordSnapshot(after) as Record<string, unknown> | null) ?? { state: "absent" }), probe: evidence, executionId: row.id },
  });
  await closeKeyAnomalies(prisma, { scope, key, actor, reason, decision });
  return { status: 200, headers: JSON_HEADERS, body: JSON.stringify({ decision, state: decision === "resolved" ? "done" : "absent" }) };
}

type Answer = z.output<typeof answerBody>;

function describe(tool: string, answer: Answer): string {
  switch (answer.outcome) {
    case "applied":
      return `${tool}'s probe in its caller's process answered: applied (status ${answer.status ?? 200})`;
    case "not_applied":
      return `${tool}'s probe in its caller's process answered: not applied${answer.note ? ` (${answer.note})` : ""}`;
    case "unknown":
      return `${tool}'s probe in its caller's process answered: cannot tell${answer.note ? ` (${answer.note})` : ""}`;
  }
}

function answerEvidence(answer: Answer) {
  switch (answer.outcome) {
    case "applied":
      return { outcome: answer.outcome, status: answer.status ?? 200, source: "client" };
    case "not_applied":
      return { outcome: answer.outcome, note: answer.note ?? null, source: "client" };
    case "unknown":
      return { outcome: answer.outcome, note: answer.note ?? null, source: "client" };
  }
}
