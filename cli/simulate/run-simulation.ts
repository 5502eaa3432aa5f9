import { randomBytes } from "node:crypto";
import { IdemgateApiError, IdemgateClient, OutcomeUnknownError, type AttemptEvent, type RetryOptions } from "@/lib/client/index";
import { sleep } from "@/lib/client/retry";
import { planSimulation, type PlannedCall, type Purpose } from "./plan";
import { emptyTally, freshKeyCounts, type FreshKeyDuplicateSent, type SimulationSummary, type ToolTally } from "./summary";
import { simulationTarget } from "./target";

export interface SimulationOptions {
  /** the gateway, e.g. http://127.0.0.1:3000: loopback, or listed in `allowedOrigins` */
  url: string;
  token: string;
  agents?: number;
  durationMs?: number;
  /**
   * how long planned calls may keep starting (default: the duration). The plan spans the duration;
   * a longer limit lets a slow machine send all of it late rather than stop part-way.
   */
  sendLimitMs?: number;
  /** plans the same traffic again (default: random, printed in the summary) */
  seed?: number;
  genuineRepeats?: boolean;
  faults?: boolean;
  /** re-send some actions under a fresh key, as a buggy caller does (default true) */
  freshKeyDuplicates?: boolean;
  /**
   * send the agents' keys as minted by a model (`Idemgate-Key-Source: model`): the gateway then
   * also answers an identical call under a fresh key within the tool's arguments window as a
   * duplicate (suppression kind fresh_key)
   */
  modelKeys?: boolean;
  /**
   * after the run: which of the fresh-key duplicates that ran were flagged by the reconciler
   * (their keys). Without it, the summary says how many ran but not how many were caught.
   */
  checkFreshKeys?: (ran: readonly FreshKeyDuplicateSent[]) => Promise<Iterable<string>>;
  /** stop sending once this many HTTP requests went out (retries included) */
  maxRequests?: number;
  allowedOrigins?: readonly string[];
  /** the agents' per-request timeout; slow calls are planned above it */
  clientTimeoutMs?: number;
  /** how long calls still running at the end may take before they are aborted */
  graceMs?: number;
  runId?: string;
  fetch?: typeof fetch;
  /** progress lines */
  log?: (line: string) => void;
  signal?: AbortSignal;
}

export const SIMULATION_DEFAULTS = {
  agents: 6,
  durationMs: 30_000,
  maxRequests: 5_000,
  clientTimeoutMs: 800,
  graceMs: 15_000,
} as const;

/** Agents retry like real ones: soon, a few times, and never longer than a second apart. */
const AGENT_RETRY: RetryOptions = { maxAttempts: 6, baseDelayMs: 100, maxDelayMs: 1_000, maxRetryAfterMs: 1_000 };
const FAULT_RETRY: Partial<RetryOptions> = { maxAttempts: 3 };

const DEMO_TOOLS = ["payments.charge", "payments.refund", "payments.list_charges", "payments.get_balance", "email.send", "email.list_outbox", "tickets.create", "tickets.list"];

export class SimulationError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "SimulationError";
  }
}

/**
 * Runs agent-like callers against a real gateway over HTTP until the plan, the duration or the
 * request budget runs out, and counts what came back. Bounded in time and requests by design.
 */
export async function runSimulation(options: SimulationOptions): Promise<SimulationSummary> {
  const origin = simulationTarget(options.url, options.allowedOrigins);
  const agents = options.agents ?? SIMULATION_DEFAULTS.agents;
  const durationMs = options.durationMs ?? SIMULATION_DEFAULTS.durationMs;
  const sendLimitMs = Math.max(durationMs, options.sendLimitMs ?? durationMs);
  const maxRequests = options.maxRequests ?? SIMULATION_DEFAULTS.maxRequests;
  const clientTimeoutMs = options.clientTimeoutMs ?? SIMULATION_DEFAULTS.clientTimeoutMs;
  const graceMs = options.graceMs ?? SIMULATION_DEFAULTS.graceMs;
  const seed = options.seed ?? randomBytes(4).readUInt32BE() >>> 1;
  const runId = options.runId ?? randomBytes(4).toString("hex");
  const log = options.log ?? (() => {});
  if (!Number.isInteger(agents) || agents < 1 || agents > 100) throw new SimulationError("agents must be between 1 and 100");
  if (!(durationMs > 0) || durationMs > 3_600_000) throw new SimulationError("the duration must be more than 0 and at most 1 hour");
  if (!Number.isInteger(maxRequests) || maxRequests < 1) throw new SimulationError("the request limit must be a positive whole number");

  const plans = planSimulation({
    runId,
    seed,
    agents,
    durationMs,
    maxCalls: maxRequests,
    genuineRepeats: options.genuineRepeats ?? false,
    faults: options.faults ?? false,
    freshKeyDuplicates: options.freshKeyDuplicates ?? true,
    clientTimeoutMs,
  });
  const modelKeys = options.modelKeys ?? false;
  const freshKeySent: FreshKeyDuplicateSent[] = [];
  const plannedKeys = new Map<string, string | null>(plans.flatMap((plan) => plan.calls.map((c) => [`${c.agent}:${c.seq}`, c.key] as const)));

  const perTool: Record<string, ToolTally> = {};
  const tally = (tool: string) => (perTool[tool] ??= emptyTally());
  const abandonedKeys = new Set<string>();
  const unknownKeys = new Set<string>();
  const sent: Partial<Record<Purpose, number>> = {};
  let requests = 0;
  let skipped = 0;
  let stoppedBy: SimulationSummary["stoppedBy"] = "plan_done";

  // noMore: no new calls (wakes sleeping agents); hardStop: abort calls still running after the grace.
  const noMore = new AbortController();
  const hardStop = new AbortController();
  const stopStarting = (reason: SimulationSummary["stoppedBy"]) => {
    if (noMore.signal.aborted) return;
    stoppedBy = reason;
    noMore.abort();
  };
  const onCallerAbort = () => {
    stopStarting("duration");
    hardStop.abort(options.signal?.reason);
  };
  options.signal?.addEventListener("abort", onCallerAbort, { once: true });

  let running = false;
  const onAttempt = (event: AttemptEvent) => {
    if (!running) return; // the tool list asked for up front is no traffic of the run
    requests++;
    const t = tally(event.tool);
    t.requests++;
    if (event.outcome === "timeout") t.timeouts++;
    if (event.problemType === "/problems/conflict") t.conflicts++;
    else if (event.problemType === "/problems/stuck") t.stuck++;
    else if (event.problemType === "/problems/abandoned") {
      t.crashes++;
      if (event.key) abandonedKeys.add(event.key);
    } else if (event.problemType === "/problems/tool_failed") t.errors++;
    if (requests >= maxRequests) stopStarting("max_requests");
  };

  const client = new IdemgateClient({ baseUrl: origin, token: options.token, timeoutMs: clientTimeoutMs, retry: AGENT_RETRY, fetch: options.fetch, onAttempt });

  let tools: string[];
  try {
    tools = (await client.listTools({ signal: options.signal })).map((t) => t.name);
  } catch (err) {
    options.signal?.removeEventListener("abort", onCallerAbort);
    if (err instanceof IdemgateApiError && err.status === 401) throw new SimulationError(`the server at ${origin} refused the token: ${err.detail ?? err.title}`, { cause: err });
    if (err instanceof IdemgateApiError) throw new SimulationError(`cannot list the tools at ${origin}: ${err.message}`, { cause: err });
    throw err;
  }
  const missing = DEMO_TOOLS.filter((name) => !tools.includes(name));
  if (missing.length) throw new SimulationError(`the server at ${origin} lacks the demo tools ${missing.join(", ")}; simulate drives the demo tools only`);

  running = true;
  const startedAt = Date.now();
  log(`simulating ${agents} agents for ${(durationMs / 1000).toFixed(0)} s against ${origin} (run ${runId}, seed ${seed})`);
  const deadlineTimer = setTimeout(() => stopStarting("duration"), sendLimitMs);
  const graceTimer = setTimeout(() => hardStop.abort(new SimulationError("the run's grace period ended")), sendLimitMs + graceMs);
  const progressTimer = setInterval(() => log(`  ${((Date.now() - startedAt) / 1000).toFixed(0)} s: ${requests} requests`), 5_000);
  progressTimer.unref?.();

  // answers: the body each of the agent's calls got back, by seq (a fresh-key duplicate is compared with its original's)
  const runCall = async (call: PlannedCall, chargeIds: Map<number, string>, answers: Map<number, string>) => {
    let args = call.args;
    if (call.chargeFrom !== undefined) {
      const chargeId = chargeIds.get(call.chargeFrom);
      if (!chargeId) {
        skipped++;
        return;
      }
      args = { ...args, chargeId };
    }
    sent[call.purpose] = (sent[call.purpose] ?? 0) + 1;
    const t = tally(call.tool);
    t.calls++;
    const report = (outcome: FreshKeyDuplicateSent["outcome"], executionId: string | null) => {
      if (call.purpose !== "fresh_key_duplicate") return;
      freshKeySent.push({ tool: call.tool, key: call.key!, originalKey: plannedKeys.get(`${call.agent}:${call.repeats}`) ?? null, session: call.session, outcome, executionId });
    };
    try {
      const result = await client.invoke<Record<string, unknown>>(call.tool, args, {
        key: call.key,
        session: call.session,
        signal: hardStop.signal,
        keySource: modelKeys && call.key !== null ? "model" : undefined,
        retry: call.purpose === "crash" || call.purpose === "tool_error" || call.purpose === "unknown_outcome" ? FAULT_RETRY : undefined,
      });
      if (call.purpose === "read") t.reads++;
      else if (result.replayed) t.replayed++;
      else t.executed++;
      if (result.status === 402) t.declines++;
      const body = JSON.stringify(result.body);
      answers.set(call.seq, body);
      if (call.tool === "payments.charge" && result.status === 200 && typeof result.body?.chargeId === "string") {
        chargeIds.set(call.seq, result.body.chargeId);
      }
      // answered with the original's own result (a new charge id would mean it ran again): the
      // gateway took it for the duplicate it is
      if (result.replayed && call.repeats !== undefined && answers.get(call.repeats) === body) report("suppressed", null);
      else report("ran", result.executionId);
    } catch (err) {
      if (err instanceof OutcomeUnknownError) {
        // final: the key is held until the tool's status probe or an operator decides
        t.unknown++;
        if (err.key) unknownKeys.add(err.key);
        report("unknown", err.executionId);
      } else {
        if (err instanceof IdemgateApiError && err.code === "mismatch") t.mismatches++;
        else t.failed++;
        // no answer at all (timeouts, a broken connection): it may have run
        report(err instanceof IdemgateApiError && err.status === 0 ? "unknown" : "failed", null);
      }
      if (!(err instanceof IdemgateApiError) && !hardStop.signal.aborted) log(`  ${call.tool}: ${(err as Error).message}`);
    }
  };


  const runAgent = async (calls: readonly PlannedCall[]) => {
    const chargeIds = new Map<number, string>();
    const answers = new Map<number, string>();
    for (const call of calls) {
      if (noMore.signal.aborted) {
        skipped++;
        continue;
      }
      const waitMs = startedAt + call.atMs - Date.now();
      if (waitMs > 0) await sleep(waitMs, noMore.signal).catch(() => {});
      if (noMore.signal.aborted) {
        skipped++;
        continue;
      }
      await runCall(call, chargeIds, answers);
    }
  };

  try {
    await Promise.all(plans.map((plan) => runAgent(plan.calls)));
  } finally {
    clearTimeout(deadlineTimer);
    clearTimeout(graceTimer);
    clearInterval(progressTimer);
    options.signal?.removeEventListener("abort", onCallerAbort);
  }

  let flagged: Set<string> | null = null;
  let checkError: string | null = null;
  const ran = freshKeySent.filter((d) => d.outcome === "ran" || d.outcome === "unknown");
  if (options.checkFreshKeys && ran.length === 0) flagged = new Set();
  else if (options.checkFreshKeys) {
    try {
      flagged = new Set(await options.checkFreshKeys(ran));
    } catch (err) {
      checkError = err instanceof Error ? err.message : String(err);
    }
  }

  const totals = emptyTally();
  for (const t of Object.values(perTool)) for (const k of Object.keys(totals) as (keyof ToolTally)[]) totals[k] += t[k];
  return {
    runId,
    seed,
    url: origin,
    agents,
    elapsedMs: Date.now() - startedAt,
    stoppedBy,
    skipped,
    perTool,
    totals,
    purposes: sent,
    caused: {
      slowCalls: sent.slow_action ?? 0,
      frameworkRetries: sent.framework_retry ?? 0,
      reemissions: sent.reemission ?? 0,
      freshKeyDuplicates: sent.fresh_key_duplicate ?? 0,
      genuineRepeatsFallback: sent.genuine_repeat_fallback ?? 0,
      genuineRepeatsReusedKey: sent.genuine_repeat_reused_key ?? 0,
      reusedKeyMismatches: sent.reused_key_other_args ?? 0,
      declines: sent.decline ?? 0,
      toolErrors: sent.tool_error ?? 0,
      unknownOutcomes: sent.unknown_outcome ?? 0,
      crashes: sent.crash ?? 0,
      expectedStuckKeys: [...abandonedKeys].sort(),
      unknownOutcomeKeys: [...unknownKeys].sort(),
    },
    freshKeys: freshKeyCounts(freshKeySent, modelKeys, flagged, checkError),
  };
}
