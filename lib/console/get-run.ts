import { staleFlagsFor } from "@/lib/anomalies/stale-flags";
import { readRunCalls, recentRuns, scopesOfSession, type RecentRun, type RunCallRow } from "@/lib/audit/run-calls";
import { NotFoundError } from "@/lib/idempotency/errors";
import { badRequest } from "@/lib/http/problem";
import type { Runtime } from "@/lib/server/runtime";
import type { KeyDetail } from "@/lib/operator/get-key-detail";
import { tenantOutcomeNote, type Audience } from "@/lib/operator/present-key";
import { tenantCaller } from "@/lib/operator/present-key-detail";

/** What happened to one call of a run, as the run page and GET /api/v1/runs/{session} say it. */
export type RunCallHappened =
  | "ran" // executed, with a result (or a final error) stored
  | "not_run" // executed, and the tool said nothing happened: the key was released
  | "running" // executed, still within its lease
  | "held_stuck" // executed, never reported, lease passed: held for a decision
  | "held_unknown" // executed, outcome unknown: held for a decision
  | "decided" // held, then released or resolved by an operator or a probe
  | "resent" // held, then sent again with the same key to a service that deduplicates
  | "replayed" // a duplicate answered with the stored result
  | "refused_duplicate" // a duplicate while the first call ran (409)
  | "refused_held" // a duplicate of a stuck or unknown key (409)
  | "refused_mismatch"; // the key reused with other arguments (422)

export interface RunCall {
  /** execution or suppression id */
  id: string;
  source: "execution" | "suppression";
  at: string;
  tool: string;
  key: string;
  happened: RunCallHappened;
  /** executions: succeeded, final_error, … (null while running or held) */
  outcome: string | null;
  durationMs: number | null;
  resultStatus: number | null;
  /** suppressions: the kind recorded (replay, conflict, stuck, unknown, mismatch, fresh_key) */
  suppression: string | null;
  /** suppressions: the execution whose record answered it; executions: their own id */
  executionId: string | null;
  gapMs: number | null;
  note: string | null;
  caller: string | null;
  transport: string;
  /** the console page of the call's key */
  keyPath: string;
  /** a replay the reconciler flagged as a stale suppression: its anomaly */
  anomaly: { id: string; status: string; path: string } | null;
}

export interface RunPage {
  session: string;
  scope: string;
  calls: RunCall[];
  nextCursor: string | null;
}

/** 1–200 visible ASCII characters, as the gateway accepts the Idemgate-Session header. */
export const SESSION_PATTERN = /^[\x21-\x7e]{1,200}$/;

const MAX_PAGE = 500;
const DEFAULT_PAGE = 100;

function happenedOf(row: RunCallRow, nowMs: number): RunCallHappened {
  if (row.source === "suppression") {
    switch (row.kind) {
      case "replay":
      case "fresh_key":
        return "replayed";
      case "conflict":
        return "refused_duplicate";
      case "mismatch":
        return "refused_mismatch";
      default:
        return "refused_held";
    }
  }
  switch (row.outcome) {
    case null:
      return row.leaseUntil && row.leaseUntil.getTime() <= nowMs ? "held_stuck" : "running";
    case "unknown":
      return "held_unknown";
    case "released":
    case "resolved":
      return "decided";
    case "retried":
      return "resent";
    case "failed":
      return "not_run";
    default:
      return "ran";
  }
}

/** A call's note as its tenant may read it: a not-run tool's own message, an unknown outcome's note without an exception's message. */
function tenantNote(row: RunCallRow): string | null {
  if (row.source !== "execution") return null;
  return row.outcome === "failed" ? row.error : row.outcome === "unknown" ? tenantOutcomeNote(row.error) : null;
}

function keyPathOf(scope: string, key: string): string {
  return `/keys/${encodeURIComponent(scope)}/${encodeURIComponent(key)}`;
}

/**
 * One page of a run's calls in time order. A tenant's token reads only its own scope's run (another
 * tenant's is 404, as one that does not exist); an operator names the scope, or gets the only
 * scope the session has calls in. A tenant reads its calls as its key detail shows them
 * (presentKeyDetailForTenant): of an outcome's error only what the caller was told, that an
 * operator made a call but not who, and no anomalies (the operators' own records).
 */
export async function getRun(
  runtime: Pick<Runtime, "db">,
  input: { session: string; scope: string | null; cursor?: string | null; limit?: string | number | null; nowMs?: number; audience?: Audience },
): Promise<RunPage> {
  const tenant = input.audience === "tenant";
  if (!SESSION_PATTERN.test(input.session)) throw badRequest("invalid_request", "a session is 1–200 visible ASCII characters, as sent in Idemgate-Session");
  const limit = input.limit === undefined || input.limit === null || input.limit === "" ? DEFAULT_PAGE : Number(input.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw badRequest("invalid_request", `limit must be a whole number from 1 to ${MAX_PAGE}`);
  const prisma = runtime.db.prisma;
  let scope = input.scope;
  if (scope === null) {
    const scopes = await scopesOfSession(prisma, input.session, 2);
    if (scopes.length > 1) throw badRequest("invalid_request", `the session ${input.session} has calls in more than one scope: name one with ?scope=`);
    scope = scopes[0] ?? null;
  }
  const notFound = () => new NotFoundError(`no run ${JSON.stringify(input.session)}`);
  if (scope === null) throw notFound();
  const page = await readRunCalls(prisma, { session: input.session, scope, limit, cursor: input.cursor ?? null });
  if (page.items.length === 0 && !input.cursor) throw notFound();
  const nowMs = input.nowMs ?? Date.now();
  const flags: Awaited<ReturnType<typeof staleFlagsFor>> = tenant ? new Map() : await staleFlagsFor(prisma, page.items.filter((r) => r.source === "suppression").map((r) => r.id));
  return {
    session: input.session,
    scope,
    nextCursor: page.nextCursor,
    calls: page.items.map((row) => {
      const flag = flags.get(row.id);
      return {
        id: row.id,
        source: row.source,
        at: row.at.toISOString(),
        tool: row.tool,
        key: row.key,
        happened: happenedOf(row, nowMs),
        outcome: row.source === "execution" ? row.outcome : null,
        durationMs: row.durationMs,
        resultStatus: row.resultStatus,
        suppression: row.kind,
        executionId: row.source === "execution" ? row.id : row.originalExecutionId,
        gapMs: row.gapMs,
        note: tenant ? tenantNote(row) : row.error,
        caller: tenant ? tenantCaller(row.caller) : row.caller,
        transport: row.transport,
        keyPath: keyPathOf(scope, row.key),
        anomaly: flag ? { id: flag.anomalyId, status: flag.status, path: `/anomalies/${encodeURIComponent(flag.anomalyId)}` } : null,
      };
    }),
  };
}

export interface RunSummary extends Omit<RecentRun, "firstAt" | "lastAt"> {
  firstAt: string;
  lastAt: string;
  path: string;
}

/** The console's Runs list: sessions with calls in the last `windowMs`, newest activity first. */
export async function listRecentRuns(
  runtime: Pick<Runtime, "db">,
  input: { scope?: string | null; heldOnly?: boolean; windowMs?: number; limit?: number; nowMs?: number } = {},
): Promise<RunSummary[]> {
  const nowMs = input.nowMs ?? Date.now();
  const runs = await recentRuns(runtime.db.prisma, {
    since: new Date(nowMs - (input.windowMs ?? 24 * 60 * 60 * 1000)),
    now: new Date(nowMs),
    scope: input.scope ?? null,
    heldOnly: input.heldOnly ?? false,
    limit: input.limit ?? 50,
  });
  return runs.map((r) => ({ ...r, firstAt: r.firstAt.toISOString(), lastAt: r.lastAt.toISOString(), path: runPath(r.scope, r.session) }));
}

/** The console page of a run. */
export function runPath(scope: string, session: string): string {
  return `/runs/${encodeURIComponent(session)}?scope=${encodeURIComponent(scope)}`;
}

/** The run a key's calls belong to: its record's session, else the first one its timeline names. */
export function sessionOfKey(detail: Pick<KeyDetail, "record" | "timeline">): string | null {
  if (detail.record?.session) return detail.record.session;
  for (const event of detail.timeline) if ("session" in event && typeof event.session === "string" && event.session) return event.session;
  return null;
}
