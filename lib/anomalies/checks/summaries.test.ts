import { describe, expect, it } from "vitest";
import type { Execution, Suppression } from "@/generated/prisma/client";
import { analyzeGaps } from "@/lib/audit/retry-gaps";
import { lostCompletion } from "./lost-completions";
import { staleSuppression } from "./stale-suppressions";
import { unknownOutcome } from "./unknown-outcomes";

const startedAt = new Date("2026-12-06T08:00:01.123Z");
const execution = (tool: string): Execution =>
  ({
    id: "e1",
    tool,
    scope: "tenant-a",
    key: "k1",
    token: 1n,
    session: null,
    startedAt,
    leaseUntil: new Date(startedAt.getTime() + 5_000),
    finishedAt: null,
    expiresAt: new Date("2026-12-07T08:00:01.999Z"),
    error: null,
    resultBody: "{}",
  }) as Execution;

describe("anomaly summaries", () => {
  it("name a tool with the right article", () => {
    const s = { id: "s1", tool: "email.send", scope: "tenant-a", key: "k1", at: startedAt, gapMs: 1, session: null, originalSession: null, originalExecutionId: null, fallback: false } as Suppression;
    expect(staleSuppression(s, analyzeGaps([]), ["a reason"]).summary).toMatch(/^an email\.send call was answered as a duplicate/);
    expect(staleSuppression({ ...s, tool: "payments.charge" }, analyzeGaps([]), ["a reason"]).summary).toMatch(/^a payments\.charge call/);
  });

  it("show times as the console does, not as raw ISO text", () => {
    const silent = unknownOutcome(execution("payments.charge"), null, startedAt.getTime() + 60_000, "silent").summary;
    expect(silent).toContain("started at 2026-12-06 08:00:01 UTC and never reported");
    expect(silent).not.toMatch(/\d{4}-\d\d-\d\dT/);
    const lost = lostCompletion(execution("payments.charge"), null, startedAt.getTime(), "runs_again").summary;
    expect(lost).toContain("no done record of it before 2026-12-07 08:00:01 UTC");
    expect(lost).not.toMatch(/\d{4}-\d\d-\d\dT/);
  });
});
