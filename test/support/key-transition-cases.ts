import type { BeginInput, KeyStore, OperatorGuard } from "@/lib/idempotency/key-store";
import { stateOf, type KeyRecord, type KeyState, type StoredResult } from "@/lib/idempotency/record";
import {
  applyPatch,
  decideBegin,
  holderPatch,
  holderRefusal,
  operatorPatch,
  operatorRefusal,
  reservationOf,
  type HolderChange,
  type OperatorChange,
} from "@/lib/idempotency/transitions";

/**
 * One table of key-state transitions, run against the rules themselves (transitions.test.ts) and
 * against every store (lib/store/key-transition-cases.test.ts): from a given state, one request,
 * and what it answers and leaves.
 *
 * The given states, all reserved at T0 with a 1 s lease by "the holder": inflight and unknown
 * (marked at T0+400) and done (completed at T0+400 for 10 s) are read at T0+500; stuck and expired
 * (completed at T0+400 for 1 s) at T0+1500.
 */
export type Given = "absent" | "inflight" | "stuck" | "unknown" | "done" | "expired";

export type Action =
  /** `other`: another fingerprint; a reservation's lease is 5 s */
  | { op: "begin"; other?: boolean; takeoverStuck?: boolean; retryUnknown?: boolean }
  /** by the holder's token, or (`other`) by another one */
  | { op: "complete" | "markUnknown" | "extendLease" | "abandon"; other?: boolean }
  /** `token`: about the holder's reservation, or another one; none: whichever holds the key */
  | { op: "release" | "resolve"; force?: boolean; token?: "holder" | "other" };

/** The answer (begin's kind; a holder's or an operator's "ok" or refusal; abandon: "ok" | "refused") and the state after it. */
export interface Observed {
  answer: string;
  after: KeyState | "absent";
  /** begin only, when it reserved: whether it took the key over from another reservation */
  takenOver?: boolean;
}

export interface TransitionCase {
  given: Given;
  action: Action;
  expected: Observed;
}

const c = (given: Given, action: Action, answer: string, after: KeyState | "absent", takenOver?: boolean): TransitionCase => ({
  given,
  action,
  expected: takenOver === undefined ? { answer, after } : { answer, after, takenOver },
});
const begin = (over: Omit<Extract<Action, { op: "begin" }>, "op"> = {}): Action => ({ op: "begin", ...over });
const holder = (op: "complete" | "markUnknown" | "extendLease" | "abandon", other = false): Action => ({ op, other });
const operator = (op: "release" | "resolve", over: { force?: boolean; token?: "holder" | "other" } = {}): Action => ({ op, ...over });

export const KEY_TRANSITION_CASES: readonly TransitionCase[] = [
  c("absent", begin(), "reserved", "inflight", false),
  c("absent", begin({ other: true, takeoverStuck: true, retryUnknown: true }), "reserved", "inflight", false),
  c("absent", holder("complete"), "absent", "absent"),
  c("absent", holder("markUnknown"), "absent", "absent"),
  c("absent", holder("extendLease"), "absent", "absent"),
  c("absent", holder("abandon"), "refused", "absent"),
  c("absent", operator("release", { force: true }), "absent", "absent"),
  c("absent", operator("resolve", { token: "holder" }), "absent", "absent"),

  c("inflight", begin(), "conflict", "inflight"),
  c("inflight", begin({ other: true }), "mismatch", "inflight"),
  c("inflight", begin({ takeoverStuck: true }), "conflict", "inflight"),
  c("inflight", begin({ retryUnknown: true }), "conflict", "inflight"),
  c("inflight", holder("complete"), "ok", "done"),
  c("inflight", holder("complete", true), "stale_token", "inflight"),
  c("inflight", holder("markUnknown"), "ok", "unknown"),
  c("inflight", holder("markUnknown", true), "stale_token", "inflight"),
  c("inflight", holder("extendLease"), "ok", "inflight"),
  c("inflight", holder("extendLease", true), "stale_token", "inflight"),
  c("inflight", holder("abandon"), "ok", "absent"),
  c("inflight", holder("abandon", true), "refused", "inflight"),
  c("inflight", operator("release"), "running", "inflight"),
  c("inflight", operator("release", { token: "holder" }), "running", "inflight"),
  c("inflight", operator("release", { force: true }), "ok", "absent"),
  c("inflight", operator("release", { force: true, token: "other" }), "changed", "inflight"),
  c("inflight", operator("resolve"), "running", "inflight"),
  c("inflight", operator("resolve", { force: true, token: "holder" }), "ok", "done"),

  c("stuck", begin(), "stuck", "stuck"),
  c("stuck", begin({ other: true }), "mismatch", "stuck"),
  c("stuck", begin({ other: true, takeoverStuck: true }), "mismatch", "stuck"),
  c("stuck", begin({ takeoverStuck: true }), "reserved", "inflight", true),
  c("stuck", begin({ retryUnknown: true }), "reserved", "inflight", true),
  c("stuck", holder("complete"), "ok", "done"),
  c("stuck", holder("complete", true), "stale_token", "stuck"),
  c("stuck", holder("markUnknown"), "ok", "unknown"),
  c("stuck", holder("extendLease"), "ok", "inflight"),
  c("stuck", holder("abandon"), "ok", "absent"),
  c("stuck", operator("release"), "ok", "absent"),
  c("stuck", operator("release", { token: "other" }), "changed", "stuck"),
  c("stuck", operator("release", { token: "holder" }), "ok", "absent"),
  c("stuck", operator("resolve"), "ok", "done"),

  c("unknown", begin(), "unknown", "unknown"),
  c("unknown", begin({ other: true }), "mismatch", "unknown"),
  c("unknown", begin({ other: true, retryUnknown: true }), "mismatch", "unknown"),
  c("unknown", begin({ takeoverStuck: true }), "unknown", "unknown"),
  c("unknown", begin({ retryUnknown: true }), "reserved", "inflight", true),
  c("unknown", holder("complete"), "stale_token", "unknown"),
  c("unknown", holder("markUnknown"), "stale_token", "unknown"),
  c("unknown", holder("extendLease"), "stale_token", "unknown"),
  c("unknown", holder("abandon"), "refused", "unknown"),
  c("unknown", operator("release"), "ok", "absent"),
  c("unknown", operator("release", { token: "other" }), "changed", "unknown"),
  c("unknown", operator("resolve"), "ok", "done"),
  c("unknown", operator("resolve", { token: "holder" }), "ok", "done"),
  c("unknown", operator("resolve", { force: true, token: "other" }), "changed", "unknown"),

  c("done", begin(), "replay", "done"),
  c("done", begin({ other: true }), "mismatch", "done"),
  c("done", begin({ takeoverStuck: true, retryUnknown: true }), "replay", "done"),
  c("done", holder("complete"), "stale_token", "done"),
  c("done", holder("markUnknown"), "stale_token", "done"),
  c("done", holder("extendLease"), "stale_token", "done"),
  c("done", holder("abandon"), "refused", "done"),
  c("done", operator("release"), "not_inflight", "done"),
  c("done", operator("release", { force: true, token: "other" }), "not_inflight", "done"),
  c("done", operator("resolve", { force: true }), "not_inflight", "done"),

  c("expired", begin(), "reserved", "inflight", false),
  c("expired", begin({ other: true }), "reserved", "inflight", false),
  c("expired", holder("complete"), "stale_token", "expired"),
  c("expired", holder("abandon"), "refused", "expired"),
  c("expired", operator("release", { force: true }), "not_inflight", "expired"),
  c("expired", operator("resolve"), "not_inflight", "expired"),
];

export const T0 = 1_800_000_000_000;
const LEASE_MS = 1_000;
const RESULT: StoredResult = { status: 200, body: '{"ok":true}', final: false };

/** When a case's request is made. */
export function nowOf(given: Given): number {
  return given === "stuck" || given === "expired" ? T0 + 1_500 : T0 + 500;
}

export function caseName(t: TransitionCase): string {
  const { op, ...options } = t.action;
  const said = Object.entries(options).filter(([, v]) => v !== undefined && v !== false);
  return `${t.given}: ${op}${said.length ? ` (${said.map(([k, v]) => (v === true ? k : `${k} ${v}`)).join(", ")})` : ""}`;
}

function beginInput(scope: string, key: string, nowMs: number, action?: Extract<Action, { op: "begin" }>): BeginInput {
  return {
    scope,
    key,
    tool: "payments.charge",
    fingerprint: action?.other ? "fp-other" : "fp-a",
    leaseMs: action ? 5_000 : LEASE_MS,
    nowMs,
    fallback: false,
    session: null,
    executionId: action ? "ex-next" : "ex-holder",
    takeoverStuck: action?.takeoverStuck ?? false,
    retryUnknown: action?.retryUnknown ?? false,
  };
}

/** The change that makes a reserved key the given state (null: it stays inflight). */
function settingUp(given: Given): HolderChange | null {
  if (given === "unknown") return { kind: "markUnknown", note: "timed out after 400 ms", nowMs: T0 + 400 };
  if (given === "done" || given === "expired") return { kind: "complete", result: RESULT, ttlMs: given === "done" ? 10_000 : 1_000, nowMs: T0 + 400 };
  return null;
}

function holderChangeOf(op: "complete" | "markUnknown" | "extendLease" | "abandon", nowMs: number): HolderChange {
  if (op === "complete") return { kind: "complete", result: RESULT, ttlMs: 10_000, nowMs };
  if (op === "markUnknown") return { kind: "markUnknown", note: "the service answered 502", nowMs };
  if (op === "extendLease") return { kind: "extendLease", leaseUntilMs: nowMs + 5_000 };
  return { kind: "abandon" };
}

function guardOf(action: OperatorAction, holderToken: number, nowMs: number): OperatorGuard {
  const token = action.token === undefined ? undefined : action.token === "holder" ? holderToken : holderToken + 1;
  return { nowMs, force: action.force ?? false, ...(token === undefined ? {} : { token }) };
}

type OperatorAction = Extract<Action, { op: "release" | "resolve" }>;
const isOperator = (action: Action): action is OperatorAction => action.op === "release" || action.op === "resolve";

const operatorChangeOf = (op: "release" | "resolve"): OperatorChange => (op === "release" ? { kind: "release" } : { kind: "resolve", result: RESULT, ttlMs: 10_000 });
const stateAfter = (record: KeyRecord | null, nowMs: number): KeyState | "absent" => (record ? stateOf(record, nowMs) : "absent");

/** The case decided by the rules alone (transitions.ts), on records built by them. */
export function runOnRules(t: TransitionCase): Observed {
  const nowMs = nowOf(t.given);
  const holderToken = 1;
  let record: KeyRecord | null = null;
  if (t.given !== "absent") {
    record = reservationOf(beginInput("s", "k", T0), holderToken);
    const change = settingUp(t.given);
    if (change) record = applyPatch(record, holderPatch(change)!);
  }
  const { action } = t;
  if (action.op === "begin") {
    const input = beginInput("s", "k", nowMs, action);
    const decision = decideBegin(record, input, nowMs);
    if (decision.kind !== "reserve") return { answer: decision.kind, after: stateAfter(record, nowMs) };
    return { answer: "reserved", after: stateAfter(reservationOf(input, holderToken + 1), nowMs), takenOver: decision.takenOver !== null };
  }
  if (isOperator(action)) {
    const refusal = operatorRefusal(record, guardOf(action, holderToken, nowMs));
    if (refusal) return { answer: refusal, after: stateAfter(record, nowMs) };
    const patch = operatorPatch(operatorChangeOf(action.op), nowMs);
    return { answer: "ok", after: stateAfter(patch && applyPatch(record!, patch), nowMs) };
  }
  const refusal = holderRefusal(record, action.other ? holderToken + 1 : holderToken);
  if (refusal) return { answer: action.op === "abandon" ? "refused" : refusal, after: stateAfter(record, nowMs) };
  const patch = holderPatch(holderChangeOf(action.op, nowMs));
  return { answer: "ok", after: stateAfter(patch && applyPatch(record!, patch), nowMs) };
}

/** The case on a real store: the given state made by its own calls under (scope, key), then the request. */
export async function runOnStore(store: KeyStore, scope: string, key: string, t: TransitionCase): Promise<Observed> {
  const nowMs = nowOf(t.given);
  let holderToken = 0;
  if (t.given !== "absent") {
    const reserved = await store.begin(beginInput(scope, key, T0));
    if (reserved.kind !== "reserved") throw new Error(`setting up ${t.given}: begin answered ${reserved.kind}`);
    holderToken = reserved.token;
    const change = settingUp(t.given);
    if (change?.kind === "markUnknown") await store.markUnknown(scope, key, holderToken, change.note, change.nowMs);
    if (change?.kind === "complete") await store.complete(scope, key, holderToken, change.result, change.ttlMs, change.nowMs);
  }
  const after = async () => stateAfter(await store.get(scope, key), nowMs);
  const { action } = t;
  if (action.op === "begin") {
    const out = await store.begin(beginInput(scope, key, nowMs, action));
    if (out.kind !== "reserved") return { answer: out.kind, after: await after() };
    return { answer: "reserved", after: await after(), takenOver: out.takenOver !== null };
  }
  if (isOperator(action)) {
    const guard = guardOf(action, holderToken, nowMs);
    const out = action.op === "release" ? await store.release(scope, key, guard) : await store.resolve(scope, key, RESULT, 10_000, guard);
    return { answer: out.ok ? "ok" : out.reason, after: await after() };
  }
  const token = action.other ? holderToken + 1 : holderToken;
  const change = holderChangeOf(action.op, nowMs);
  let answer: string;
  if (change.kind === "abandon") answer = (await store.abandon(scope, key, token)) ? "ok" : "refused";
  else {
    const out =
      change.kind === "complete"
        ? await store.complete(scope, key, token, change.result, change.ttlMs, change.nowMs)
        : change.kind === "markUnknown"
          ? await store.markUnknown(scope, key, token, change.note, change.nowMs)
          : await store.extendLease(scope, key, token, change.leaseUntilMs);
    answer = out.ok ? "ok" : out.reason;
  }
  return { answer, after: await after() };
}
