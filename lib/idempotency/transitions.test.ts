import { describe, expect, it } from "vitest";
import { caseName, KEY_TRANSITION_CASES, runOnRules } from "@/test/support/key-transition-cases";
import type { PriorExecution } from "./audit-port";
import { heldOpen, keepsResult, mayRunAfter } from "./transitions";

describe("the key-state rules, on the shared table of transitions", () => {
  for (const t of KEY_TRANSITION_CASES) {
    it(caseName(t), () => {
      expect(runOnRules(t)).toEqual(t.expected);
    });
  }
});

describe("the rules over the audit log's latest execution of a key", () => {
  const T = 1_800_000_000_000;
  const prior = (over: Partial<PriorExecution>): PriorExecution => ({
    id: "ex-1",
    token: 7,
    fingerprint: "fp",
    tool: "payments.charge",
    session: null,
    startedAt: new Date(T),
    leaseUntil: new Date(T + 1_000),
    outcome: null,
    resultStatus: null,
    resultBody: null,
    resultFinal: null,
    expiresAt: null,
    error: null,
    finishedAt: null,
    ...over,
  });
  const succeeded = prior({ outcome: "succeeded", resultStatus: 200, resultBody: "{}", resultFinal: false, expiresAt: new Date(T + 10_000), finishedAt: new Date(T + 5) });

  it("lets a call run after one that applied nothing, or whose result expired, never after an open or unknown one", () => {
    for (const outcome of ["failed", "released", "retried"] as const) expect(mayRunAfter(prior({ outcome }), T)).toBe(true);
    expect(mayRunAfter(prior({ outcome: null }), T + 60_000)).toBe(false);
    expect(mayRunAfter(prior({ outcome: "unknown" }), T + 60_000)).toBe(false);
    expect(mayRunAfter(succeeded, T + 9_999)).toBe(false);
    expect(mayRunAfter(succeeded, T + 10_000)).toBe(true);
  });

  it("keeps a stored result for replay until it expires, and nothing of a call that applied nothing", () => {
    expect(keepsResult(succeeded, T + 9_999)).toBe(true);
    expect(keepsResult(succeeded, T + 10_000)).toBe(false);
    expect(keepsResult({ ...succeeded, resultBody: null }, T)).toBe(false);
    expect(keepsResult({ ...succeeded, outcome: "released" }, T)).toBe(false);
  });

  it("holds a key open for an unknown outcome whatever the time, and for a silent call once its lease passed", () => {
    expect(heldOpen(prior({ outcome: "unknown" }), T)).toBe(true);
    expect(heldOpen(prior({ outcome: null }), T + 999)).toBe(false);
    expect(heldOpen(prior({ outcome: null }), T + 1_000)).toBe(true);
    expect(heldOpen(succeeded, T + 60_000)).toBe(false);
  });
});
