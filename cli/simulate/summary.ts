import type { Purpose } from "./plan";

/** What one tool saw. Call counts are per invoke(); answer counts are per HTTP request. */
export interface ToolTally {
  /** logical sends (one invoke() each, retries not counted) */
  calls: number;
  /** HTTP requests, retries included */
  requests: number;
  /** write calls answered by a fresh execution (a fresh decline included) */
  executed: number;
  /** write calls answered from a stored result */
  replayed: number;
  /** read calls answered */
  reads: number;
  /** 409 answers: a call with the key was still running (the client waited and retried) */
  conflicts: number;
  /** 409 answers for a stuck key */
  stuck: number;
  /** 422 answers: a key reused with other arguments */
  mismatches: number;
  /** calls answered 402 (declined), fresh or replayed */
  declines: number;
  /** 502 answers: the tool failed before its side effect */
  errors: number;
  /** 500 answers: the call was abandoned after its side effect */
  crashes: number;
  /** calls that ended with the outcome unknown (502/504, or 409 for a key held so): final, never retried */
  unknown: number;
  /** requests the client gave up waiting for */
  timeouts: number;
  /** calls that ended in an error after all retries */
  failed: number;
}

export function emptyTally(): ToolTally {
  return { calls: 0, requests: 0, executed: 0, replayed: 0, reads: 0, conflicts: 0, stuck: 0, mismatches: 0, declines: 0, errors: 0, crashes: 0, unknown: 0, timeouts: 0, failed: 0 };
}

/** What the run caused on purpose, counted from the calls that were actually sent. */
export interface CausedOnPurpose {
  /** tools slower than the client's timeout: the client retried while the first call ran */
  slowCalls: number;
  /** same call, same key, right after the answer: expected replays */
  frameworkRetries: number;
  /** same action, same key, seconds later: expected replays */
  reemissions: number;
  /** same action under a fresh key: each is an expected duplicate side effect (two charges) */
  freshKeyDuplicates: number;
  /** identical keyless tickets after a long gap: expected fallback suppressions (stale-suppression candidates) */
  genuineRepeatsFallback: number;
  /** identical actions under a conversation's key after a long gap: expected stale replays */
  genuineRepeatsReusedKey: number;
  /** other actions under a conversation's key: expected 422s */
  reusedKeyMismatches: number;
  declines: number;
  toolErrors: number;
  /** calls whose tool threw after its side effect: the outcome is unknown, the key held */
  unknownOutcomes: number;
  /** calls that crashed after their side effect */
  crashes: number;
  /** keys left inflight by a crash: stuck once their lease (60 s for the demo tools) passes */
  expectedStuckKeys: string[];
  /** keys the gateway holds as unknown (every call that ended outcome unknown) */
  unknownOutcomeKeys: string[];
}

/** One fresh-key duplicate the run sent, and what came of it. */
export interface FreshKeyDuplicateSent {
  tool: string;
  /** the fresh key it was sent under */
  key: string;
  /** the key of the action it repeats */
  originalKey: string | null;
  session: string;
  /**
   * suppressed: answered with the original's result (an advisory key's arguments window);
   * ran: executed again, a second side effect; unknown: it may have run (the outcome was unknown,
   * or no answer came); failed: the gateway refused it or its tool said it ran nothing
   */
  outcome: "suppressed" | "ran" | "unknown" | "failed";
  /** the execution that ran, when the answer named it */
  executionId: string | null;
}

/** Fresh-key duplicates: caused on purpose, and how many Idemgate caught. */
export interface FreshKeyFigures {
  /** the keys were sent as model-minted (advisory) */
  modelKeys: boolean;
  caused: number;
  /** answered as duplicates at once (suppression kind fresh_key) */
  suppressed: number;
  /** ran again (or may have: outcome unknown): a duplicate side effect for the reconciler to flag */
  ran: number;
  /** of those that ran, flagged by the reconciler as fresh_key_duplicate; null: not checked */
  flagged: number | null;
  /** suppressed + flagged; null when some ran and they were not checked */
  caught: number | null;
  /** ended in an error that ran nothing */
  failed: number;
  /** why the check against the reconciler could not be made */
  checkError: string | null;
  /** ran and were not flagged (their keys): should be none */
  missed: string[];
  sent: FreshKeyDuplicateSent[];
}

export function freshKeyCounts(sent: readonly FreshKeyDuplicateSent[], modelKeys: boolean, flagged: ReadonlySet<string> | null, checkError: string | null): FreshKeyFigures {
  const ran = sent.filter((d) => d.outcome === "ran" || d.outcome === "unknown");
  const suppressed = sent.filter((d) => d.outcome === "suppressed").length;
  const flaggedRan = flagged === null ? null : ran.filter((d) => flagged.has(d.key)).length;
  return {
    modelKeys,
    caused: sent.length,
    suppressed,
    ran: ran.length,
    flagged: flaggedRan,
    caught: flaggedRan === null ? (ran.length === 0 ? suppressed : null) : suppressed + flaggedRan,
    failed: sent.filter((d) => d.outcome === "failed").length,
    checkError,
    missed: flagged === null ? [] : ran.filter((d) => !flagged.has(d.key)).map((d) => d.key),
    sent: [...sent],
  };
}

export interface SimulationSummary {
  runId: string;
  seed: number;
  url: string;
  agents: number;
  /** wall time of the run */
  elapsedMs: number;
  stoppedBy: "plan_done" | "duration" | "max_requests";
  /** planned calls never sent (the duration or the request budget ran out, or a refund had no charge) */
  skipped: number;
  perTool: Record<string, ToolTally>;
  totals: ToolTally;
  caused: CausedOnPurpose;
  /** fresh-key duplicates caused, and caught (suppressed at once, or flagged by the reconciler) */
  freshKeys: FreshKeyFigures;
  /** calls per purpose, as sent */
  purposes: Partial<Record<Purpose, number>>;
}

const COLUMNS: [keyof ToolTally, string][] = [
  ["calls", "calls"],
  ["requests", "requests"],
  ["executed", "fresh"],
  ["replayed", "replays"],
  ["reads", "reads"],
  ["conflicts", "409 busy"],
  ["stuck", "409 stuck"],
  ["mismatches", "422"],
  ["declines", "402"],
  ["errors", "502"],
  ["crashes", "500 crash"],
  ["unknown", "unknown"],
  ["timeouts", "timeouts"],
  ["failed", "gave up"],
];

function table(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  return cells.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ")).join("\n");
}

/** The summary as the CLI prints it. */
export function formatSummary(s: SimulationSummary): string {
  const tools = Object.keys(s.perTool).sort();
  const rows = tools.map((tool) => [tool, ...COLUMNS.map(([k]) => s.perTool[tool][k])]);
  rows.push(["total", ...COLUMNS.map(([k]) => s.totals[k])]);
  const c = s.caused;
  const stuck = c.expectedStuckKeys;
  const lines = [
    `Simulation ${s.runId} against ${s.url}: ${s.agents} agents, ${(s.elapsedMs / 1000).toFixed(1)} s, seed ${s.seed} (${stopText(s.stoppedBy)}${s.skipped ? `, ${s.skipped} planned calls not sent` : ""}).`,
    "",
    table(["tool", ...COLUMNS.map(([, label]) => label)], rows),
    "",
    "Caused on purpose:",
    `  slow tools (client timed out and retried):      ${c.slowCalls}`,
    `  framework retries (same key, at once):          ${c.frameworkRetries}   -> replays`,
    `  model re-emissions (same key, seconds later):   ${c.reemissions}   -> replays`,
    `  fresh-key duplicates (caller bug):              ${c.freshKeyDuplicates}   -> ${freshKeyText(s.freshKeys)}`,
    `  genuine repeats via fallback dedupe:            ${c.genuineRepeatsFallback}   -> stale-suppression candidates`,
    `  genuine repeats under a reused key:             ${c.genuineRepeatsReusedKey}   -> stale-suppression candidates`,
    `  other actions under a reused key:               ${c.reusedKeyMismatches}   -> 422 mismatches`,
    `  declines / tool errors:                         ${c.declines} / ${c.toolErrors}`,
    `  unknown outcomes (tool threw after its effect): ${c.unknownOutcomes}   -> ${c.unknownOutcomeKeys.length} keys held as unknown`,
    `  crashes after the side effect:                  ${c.crashes}   -> ${stuck.length} keys stuck once their lease passes`,
  ];
  if (stuck.length) lines.push(`  stuck-to-be keys: ${stuck.slice(0, 5).join(", ")}${stuck.length > 5 ? `, … (${stuck.length - 5} more)` : ""}`);
  const f = s.freshKeys;
  if (f.caused > 0) {
    lines.push("", `Fresh-key duplicates: caught ${f.caught === null ? "?" : f.caught} of ${f.caused} caused${f.modelKeys ? " (keys sent as model-minted)" : ""}.`);
    if (f.missed.length) lines.push(`  ran and not flagged: ${f.missed.slice(0, 5).join(", ")}${f.missed.length > 5 ? `, … (${f.missed.length - 5} more)` : ""}`);
    if (f.checkError) lines.push(`  not checked against the reconciler: ${f.checkError}`);
    else if (f.flagged === null && f.ran > 0) lines.push("  not checked against the reconciler: see the anomalies page (type Fresh-key duplicate), or run with --reconcile");
  }
  return lines.join("\n");
}

function freshKeyText(f: FreshKeyFigures): string {
  const parts = [`${f.suppressed} suppressed as fresh_key`, `${f.ran} ran twice${f.flagged === null ? "" : `, ${f.flagged} of them flagged`}`];
  if (f.failed) parts.push(`${f.failed} failed`);
  return parts.join(", ");
}

function stopText(stoppedBy: SimulationSummary["stoppedBy"]): string {
  return stoppedBy === "plan_done" ? "plan done" : stoppedBy === "duration" ? "stopped at the duration" : "stopped at the request limit";
}
