import { describe, expect, it } from "vitest";
import { runProbe, type HeldCall } from "./index";

// A probe's answer as the resolver (and guard()) takes it: only a clear applied or not applied
// decides; a probe that throws, hangs or answers something else cannot tell.

const call: HeldCall = {
  executionId: "0b6f5c2e-4d1a-4a8e-9a53-2f0f7f0a1b2c",
  tool: "pay.charge",
  key: "order-42",
  scope: "tenant-a",
  state: "unknown",
  startedAt: new Date().toISOString(),
  leaseUntil: new Date().toISOString(),
  leaseEnded: true,
  note: "timed out",
  arguments: { orderId: "42" },
};

describe("runProbe", () => {
  it("passes applied (with a result status of 200–499) and not applied through", async () => {
    expect(await runProbe(() => ({ applied: true, result: { id: "ch_1" } }), call, 1_000)).toEqual({ answer: { applied: true, result: { id: "ch_1" } }, note: null });
    expect(await runProbe(async () => ({ applied: true, result: { declined: true }, status: 402 }), call, 1_000)).toEqual({ answer: { applied: true, result: { declined: true }, status: 402 }, note: null });
    expect(await runProbe(() => ({ applied: false }), call, 1_000)).toEqual({ answer: { applied: false }, note: null });
  });

  it("a probe that throws, hangs past its timeout, or answers nonsense cannot tell", async () => {
    expect(await runProbe(() => {
      throw new Error("provider 503");
    }, call, 1_000)).toEqual({ answer: null, note: "the probe threw: provider 503" });
    let aborted = false;
    const hung = await runProbe((_c, { signal }) => new Promise(() => signal.addEventListener("abort", () => (aborted = true))), call, 50);
    expect(hung).toEqual({ answer: null, note: "the probe did not answer within 50 ms" });
    expect(aborted).toBe(true);
    expect((await runProbe(() => ({ applied: "yes" }) as never, call, 1_000)).answer).toBeNull();
    expect((await runProbe(() => ({ applied: true, result: 1, status: 500 }), call, 1_000)).answer).toBeNull();
    expect((await runProbe(() => null, call, 1_000)).answer).toBeNull();
  });
});
