import { describe, expect, it, vi } from "vitest";
import { problemAnswer } from "@/lib/http/problem";
import type { KeyRecord } from "@/lib/idempotency/record";
import { ConflictError, isIdemgateError, NotFoundError } from "./errors";
import { isAbandonCall, isFinalToolError, isNotRunError, isOutcomeUnknown } from "./tool";

/**
 * Next.js bundles instrumentation.ts (which opens the runtime) apart from the route handlers: an
 * error thrown there is an instance of another copy of its class. A second evaluation of the modules
 * (vi.resetModules, then import again) stands in for that other bundle.
 */
async function otherBundle() {
  vi.resetModules();
  const errors = await import("./errors");
  const tool = await import("./tool");
  const audit = await import("./audit-port");
  const problem = await import("@/lib/http/problem");
  const passwords = await import("@/lib/auth/passwords");
  return { errors, tool, audit, problem, passwords };
}

describe("recognizing Idemgate errors across bundles", () => {
  it("recognizes another copy's errors by brand and code where instanceof fails", async () => {
    const other = await otherBundle();
    const notFound = new other.errors.NotFoundError("no such anomaly");
    expect(notFound instanceof NotFoundError).toBe(false);
    expect(isIdemgateError(notFound)).toBe(true);
    expect(isIdemgateError(notFound, "not_found")).toBe(true);
    expect(isIdemgateError(notFound, "invalid_state")).toBe(false);
    expect(isIdemgateError(new other.audit.OpenExecutionError("s", "k"), "open_execution")).toBe(true);
    expect(isIdemgateError(new other.passwords.PasswordCheckBusyError(), "password_check_busy")).toBe(true);
    expect(isIdemgateError(new other.problem.ForbiddenError("no"), "forbidden")).toBe(true);
  });

  it("recognizes the signals a tool throws from another copy of the tool module", async () => {
    const { tool } = await otherBundle();
    expect(isNotRunError(new tool.NotRunError("refused", 429))).toBe(true);
    expect(isFinalToolError(new tool.FinalToolError(402, { declined: true }))).toBe(true);
    expect(isOutcomeUnknown(new tool.OutcomeUnknown("timed out", true))).toBe(true);
    expect(isAbandonCall(new tool.AbandonCall())).toBe(true);
    expect(isNotRunError(new tool.OutcomeUnknown("timed out"))).toBe(false);
  });

  it("does not take look-alikes for Idemgate errors", () => {
    const lookalike = Object.assign(new Error("a conflict"), { code: "conflict", name: "ConflictError" });
    expect(isIdemgateError(lookalike)).toBe(false);
    expect(isNotRunError(Object.assign(new Error("x"), { name: "NotRunError" }))).toBe(false);
    expect(isIdemgateError(null)).toBe(false);
    expect(isIdemgateError("not_found")).toBe(false);
    // an unknown error is a 500 without details, whatever code it carries
    const answer = problemAnswer(lookalike);
    expect(answer.status).toBe(500);
    expect(JSON.parse(answer.body).detail).not.toContain("a conflict");
  });

  it("answers another copy's engine error with its own problem", async () => {
    const { errors } = await otherBundle();
    const record: KeyRecord = {
      scope: "s", key: "k", tool: "t", fingerprint: "f", status: "inflight", token: 1, createdAtMs: 0, leaseUntilMs: 30_000,
      completedAtMs: null, expiresAtMs: null, result: null, fallback: false, session: null, executionId: null, outcomeNote: null, unknownAtMs: null,
    };
    const err = new errors.ConflictError(record);
    expect(err instanceof ConflictError).toBe(false);
    const answer = problemAnswer(err);
    expect(answer.status).toBe(409);
    expect(answer.headers["Retry-After"]).toBe("1");
    expect(JSON.parse(answer.body).type).toBe("/problems/conflict");
  });
});
