import { Random } from "./random";

/** Why a call is in the plan: each kind produces one pattern the console should show. */
export type Purpose =
  /** a new logical action under its own key */
  | "action"
  /** a new action whose tool is slower than the client's timeout: the client retries while it runs */
  | "slow_action"
  /** the same call re-sent with the same key right after the answer (a framework's retry) */
  | "framework_retry"
  /** the same logical action re-sent seconds later with the same key (a model re-emitting it) */
  | "reemission"
  /** the same action re-sent under a fresh key: a caller bug, two side effects */
  | "fresh_key_duplicate"
  /** a keyless call to the fallback-dedupe tool */
  | "keyless"
  /** an identical keyless action repeated genuinely, after a long gap: swallowed by fallback dedupe */
  | "genuine_repeat_fallback"
  /** the first action under a conversation's single key (a caller minting one key per conversation) */
  | "conversation_key"
  /** an identical action repeated genuinely under the conversation's key: answered by a stale replay */
  | "genuine_repeat_reused_key"
  /** another action under the conversation's key: a 422 mismatch */
  | "reused_key_other_args"
  | "decline"
  | "tool_error"
  /** the side effect commits, then the tool throws: the outcome is unknown and the key held (502) */
  | "unknown_outcome"
  /** the side effect commits, the call is abandoned: the key gets stuck after its lease */
  | "crash"
  | "read";

export interface PlannedCall {
  /** position in the agent's plan */
  seq: number;
  agent: number;
  /** when to send it, from the start of the run */
  atMs: number;
  session: string;
  tool: string;
  args: Record<string, unknown>;
  /** an explicit key, or null for a keyless call (reads, fallback dedupe) */
  key: string | null;
  purpose: Purpose;
  /** the seq of the call this one repeats (same agent) */
  repeats?: number;
  /** a refund: its chargeId is the one the call with this seq got back */
  chargeFrom?: number;
}

export interface AgentPlan {
  agent: number;
  calls: PlannedCall[];
}

export interface PlanOptions {
  /** names this run's keys, sessions and titles, so a second run never collides with the first */
  runId: string;
  seed: number;
  agents: number;
  durationMs: number;
  /** at most this many calls in the whole plan */
  maxCalls: number;
  genuineRepeats: boolean;
  faults: boolean;
  /**
   * re-send some actions under a fresh key, as a buggy caller does (default true): each is a
   * duplicate side effect unless the gateway catches it
   */
  freshKeyDuplicates?: boolean;
  /** the client's per-request timeout: slow calls are planned above it */
  clientTimeoutMs: number;
}

/** The time shapes of the traffic, in milliseconds. */
export const TIMING = {
  thinkMs: [150, 1_200],
  fastLatencyMs: [10, 250],
  /** above the client's timeout, so it retries while the first call still runs */
  slowExtraMs: [400, 1_700],
  frameworkRetryGapMs: [0, 50],
  reemissionGapMs: [2_000, 6_000],
  freshKeyGapMs: [200, 1_500],
  /** genuine repeats: well after any retry, but inside the 60 s fallback-dedupe window */
  genuineGapMs: [10_000, 40_000],
  genuineGapShare: [0.35, 0.65],
} as const;

/** The last moment anything is scheduled: the run's tail is left for calls in flight. */
export function planHorizonMs(durationMs: number): number {
  return Math.floor(durationMs * 0.95);
}

const CUSTOMERS = ["cus_ada", "cus_grace", "cus_linus", "cus_barbara", "cus_edsger", "cus_margaret"];
const CURRENCIES = ["USD", "EUR", "GBP"];
const SUBJECTS = ["Your receipt", "Shipping update", "Password reset", "Welcome aboard", "Invoice overdue"];
const TICKETS = ["Printer on fire", "Cannot log in", "Refund not received", "App crashes on start", "Wrong invoice address"];

type Choice =
  | "read"
  | "action"
  | "slow_action"
  | "framework_retry"
  | "reemission"
  | "fresh_key_duplicate"
  | "refund"
  | "keyless"
  | "genuine_repeat_fallback"
  | "genuine_repeat_reused_key"
  | "reused_key_other_args"
  | "decline"
  | "tool_error"
  | "unknown_outcome"
  | "crash";

function weightsFor(options: PlanOptions): Partial<Record<Choice, number>> {
  return {
    read: 14,
    action: 26,
    slow_action: 9,
    framework_retry: 9,
    reemission: 9,
    ...(options.freshKeyDuplicates === false ? {} : { fresh_key_duplicate: 4 }),
    refund: 6,
    keyless: 4,
    ...(options.genuineRepeats ? { genuine_repeat_fallback: 4, genuine_repeat_reused_key: 4, reused_key_other_args: 2 } : {}),
    ...(options.faults ? { decline: 4, tool_error: 3, unknown_outcome: 2, crash: 2 } : {}),
  };
}

/**
 * Plans every agent's calls up front, from the seed alone (and the runId, which only names things):
 * the same options plan the same traffic. Each agent runs conversations (one session each) of a
 * few actions; follow-ups (retries, re-emissions, repeats) are scheduled after their original.
 */
export function planSimulation(options: PlanOptions): AgentPlan[] {
  const random = new Random(options.seed);
  const horizon = planHorizonMs(options.durationMs);
  const perAgent = Math.max(1, Math.floor(options.maxCalls / Math.max(1, options.agents)));
  const plans: AgentPlan[] = [];
  for (let agent = 0; agent < options.agents; agent++) {
    plans.push({ agent, calls: planAgent(agent, options, new Random(random.int(1, 2 ** 31 - 1)), horizon, perAgent) });
  }
  return plans;
}

function planAgent(agent: number, options: PlanOptions, random: Random, horizon: number, budget: number): PlannedCall[] {
  const calls: PlannedCall[] = [];
  const weights = weightsFor(options);
  const between = (range: readonly [number, number]) => random.int(range[0], range[1]);
  const prefix = `sim-${options.runId}-a${agent}`;
  let counter = 0;
  const nextKey = () => `${prefix}-k${counter++}`;
  // every action's arguments are its own: two actions never share a fingerprint unless a
  // follow-up repeats one on purpose (only those may be flagged as fresh-key duplicates)
  let actionCount = 0;
  const charges: number[] = [];
  const add = (call: Omit<PlannedCall, "seq" | "agent">): PlannedCall | null => {
    if (calls.length >= budget || call.atMs > horizon) return null;
    const planned = { ...call, seq: calls.length, agent };
    calls.push(planned);
    return planned;
  };
  const fastLatency = () => between(TIMING.fastLatencyMs);
  const writeArgs = (tool: string, simulate: Record<string, unknown>): Record<string, unknown> => {
    const n = actionCount++;
    switch (tool) {
      case "payments.charge":
        return { customerId: random.pick(CUSTOMERS), amountCents: random.int(1, 400) * 50, currency: random.pick(CURRENCIES), description: `${prefix} order ${n}`, simulate };
      case "email.send":
        return { to: `user${random.int(1, 40)}@example.com`, subject: random.pick(SUBJECTS), body: `${prefix} message ${n}`, simulate };
      default:
        return { title: `${random.pick(TICKETS)} (${prefix}-${n})`, simulate };
    }
  };
  const writeTool = () => random.weighted({ "payments.charge": 5, "email.send": 3, "tickets.create": 2 });
  const readCall = (): { tool: string; args: Record<string, unknown> } => {
    const tool = random.pick(["payments.list_charges", "payments.get_balance", "email.list_outbox", "tickets.list"]);
    return { tool, args: tool.startsWith("payments.") ? { customerId: random.pick(CUSTOMERS) } : {} };
  };

  let t = random.int(0, 800);
  for (let conversation = 0; t <= horizon && calls.length < budget; conversation++) {
    const session = `${prefix}-c${conversation}`;
    const conversationKey = `${session}-key`;
    let conversationAction: PlannedCall | null = null;
    const actions = random.int(2, 5);
    for (let i = 0; i < actions && t <= horizon && calls.length < budget; i++) {
      let choice = random.weighted(weights);
      // a charge is refunded once: a second identical refund would be a duplicate, not an action
      if (choice === "refund" && charges.length === 0) choice = "action";
      switch (choice) {
        case "read": {
          add({ atMs: t, session, ...readCall(), key: null, purpose: "read" });
          break;
        }
        case "action":
        case "slow_action":
        case "framework_retry":
        case "reemission":
        case "fresh_key_duplicate": {
          const tool = writeTool();
          const slow = choice === "slow_action";
          const latencyMs = slow ? options.clientTimeoutMs + between(TIMING.slowExtraMs) : fastLatency();
          const args = writeArgs(tool, { latencyMs });
          const key = nextKey();
          const first = add({ atMs: t, session, tool, args, key, purpose: slow ? "slow_action" : "action" });
          if (!first) break;
          if (tool === "payments.charge") charges.push(first.seq);
          if (choice === "framework_retry") {
            add({ atMs: t + between(TIMING.frameworkRetryGapMs), session, tool, args, key, purpose: choice, repeats: first.seq });
          } else if (choice === "reemission") {
            add({ atMs: t + latencyMs + between(TIMING.reemissionGapMs), session, tool, args, key, purpose: choice, repeats: first.seq });
          } else if (choice === "fresh_key_duplicate") {
            add({ atMs: t + latencyMs + between(TIMING.freshKeyGapMs), session, tool, args, key: nextKey(), purpose: choice, repeats: first.seq });
          }
          break;
        }
        case "refund": {
          const chargeFrom = charges.splice(random.int(0, charges.length - 1), 1)[0];
          add({ atMs: t, session, tool: "payments.refund", args: { chargeId: null, simulate: { latencyMs: fastLatency() } }, key: nextKey(), purpose: "action", chargeFrom });
          break;
        }
        case "keyless":
        case "genuine_repeat_fallback": {
          const args = writeArgs("tickets.create", { latencyMs: fastLatency() });
          const first = add({ atMs: t, session, tool: "tickets.create", args, key: null, purpose: "keyless" });
          if (first && choice === "genuine_repeat_fallback") {
            add({ atMs: t + genuineGap(options.durationMs, random), session, tool: "tickets.create", args, key: null, purpose: choice, repeats: first.seq });
          }
          break;
        }
        case "genuine_repeat_reused_key":
        case "reused_key_other_args": {
          // a caller that mints one key per conversation: its first action takes the key, and a
          // later action of the conversation reuses it
          if (conversationAction === null) {
            const tool = writeTool();
            conversationAction = add({ atMs: t, session, tool, args: writeArgs(tool, { latencyMs: fastLatency() }), key: conversationKey, purpose: "conversation_key" });
            if (!conversationAction) break;
            if (tool === "payments.charge") charges.push(conversationAction.seq);
            t += between(TIMING.thinkMs);
          }
          const original: PlannedCall = conversationAction;
          if (choice === "genuine_repeat_reused_key") {
            const atMs = Math.max(t, original.atMs + genuineGap(options.durationMs, random));
            add({ atMs, session, tool: original.tool, args: original.args, key: conversationKey, purpose: choice, repeats: original.seq });
          } else {
            add({ atMs: t, session, tool: original.tool, args: writeArgs(original.tool, { latencyMs: fastLatency() }), key: conversationKey, purpose: choice, repeats: original.seq });
          }
          break;
        }
        case "decline":
        case "tool_error":
        case "unknown_outcome":
        case "crash": {
          const tool = writeTool();
          const outcome = { crash: "crash_after_effect", unknown_outcome: "throw_after_effect", tool_error: "error", decline: "decline" }[choice];
          add({ atMs: t, session, tool, args: writeArgs(tool, { latencyMs: fastLatency(), outcome }), key: nextKey(), purpose: choice });
          break;
        }
      }
      t += between(TIMING.thinkMs);
    }
    t += between(TIMING.thinkMs);
  }
  // Follow-ups were added out of time order; the agent works through its plan by time.
  return calls.sort((a, b) => a.atMs - b.atMs || a.seq - b.seq);
}

/** A genuine repeat comes much later than any retry: a share of the run, within fixed bounds. */
function genuineGap(durationMs: number, random: Random): number {
  const [lowShare, highShare] = TIMING.genuineGapShare;
  const share = lowShare + random.next() * (highShare - lowShare);
  return Math.round(Math.min(TIMING.genuineGapMs[1], Math.max(TIMING.genuineGapMs[0], durationMs * share)));
}

/** What the plan causes on purpose, counted from its calls. */
export function countPurposes(plans: readonly AgentPlan[]): Record<Purpose, number> {
  const counts = Object.fromEntries(
    (
      ["action", "slow_action", "framework_retry", "reemission", "fresh_key_duplicate", "keyless", "genuine_repeat_fallback", "conversation_key", "genuine_repeat_reused_key", "reused_key_other_args", "decline", "tool_error", "unknown_outcome", "crash", "read"] as const
    ).map((p) => [p, 0]),
  ) as Record<Purpose, number>;
  for (const plan of plans) for (const call of plan.calls) counts[call.purpose]++;
  return counts;
}
