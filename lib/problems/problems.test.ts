import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import {
  ForbiddenError,
  InvalidHeaderError,
  InvalidJsonError,
  InvalidRequestError,
  LeaseRunningError,
  LimitReachedError,
  NameTakenError,
  NotHeldError,
  PayloadTooLargeError,
  ProbeClaimedError,
  problemAnswer,
  UnauthorizedError,
  UnsupportedMediaTypeError,
} from "@/lib/http/problem";
import {
  ExecutionNotFoundError,
  IdemgateError,
  isIdemgateError,
  LeasePassedError,
  OutcomeUnknownError,
  TooManyWaitersError,
  UnavailableError,
  UnknownOutcomeKeyError,
} from "@/lib/idempotency/errors";
import type { KeyRecord } from "@/lib/idempotency/record";
import { isProblemCode, PROBLEM_CODES, PROBLEMS, retriedByClients } from "./problems";

class UnlistedError extends IdemgateError {
  // @ts-expect-error an error class whose code has no entry in the problem table does not compile
  readonly code = "no_such_problem";
}

const record = { scope: "s", key: "k", tool: "t", createdAtMs: 0, leaseUntilMs: null, status: "unknown", executionId: "e-1", outcomeNote: "timed out" } as unknown as KeyRecord;

describe("the problem table", () => {
  it("has one entry per code, each with a retry rule and a page's text", () => {
    expect(new Set(PROBLEM_CODES).size).toBe(Object.keys(PROBLEMS).length);
    for (const code of PROBLEM_CODES) {
      expect(PROBLEMS[code].title.length).toBeGreaterThan(3);
      expect(["yes", "after Retry-After", "no", "with changes"]).toContain(PROBLEMS[code].retry);
      expect(PROBLEMS[code].happened.length).toBeGreaterThan(10);
    }
    expect(isProblemCode("constructor")).toBe(false);
    expect(isProblemCode("__proto__")).toBe(false);
    expect(PROBLEM_CODES.filter((c) => retriedByClients(PROBLEMS[c].retry)).sort()).toEqual(["conflict", "internal", "request_timeout", "server_busy", "tool_failed", "unavailable"]);
  });

  it("answers each HTTP-layer error with its type's status and headers", () => {
    const now = 1_000_000;
    const errors = [
      new UnauthorizedError("who"),
      new ForbiddenError("no"),
      new InvalidRequestError("bad"),
      new InvalidHeaderError("bad"),
      new InvalidJsonError("bad"),
      new UnsupportedMediaTypeError("xml"),
      new PayloadTooLargeError("big"),
      new NameTakenError("taken"),
      new LimitReachedError("full"),
      new NotHeldError("gone"),
      new ProbeClaimedError("claimed", now + 2_500, now),
      new LeaseRunningError("running", now + 10, now),
    ];
    for (const err of errors) {
      const answer = problemAnswer(err);
      expect(answer.status).toBe(PROBLEMS[err.code].status);
      expect(err.status).toBe(PROBLEMS[err.code].status);
      expect(JSON.parse(answer.body)).toMatchObject({ type: `/problems/${err.code}`, title: PROBLEMS[err.code].title });
    }
    expect(problemAnswer(errors[0]).headers["WWW-Authenticate"]).toBe('Bearer realm="idemgate"');
    expect(problemAnswer(errors[10]).headers["Retry-After"]).toBe("3");
    expect(problemAnswer(errors[11]).headers["Retry-After"]).toBe("1");
  });

  it("gives each code one class: the variants of a code are subclasses of its class", () => {
    expect(new LeasePassedError(0)).toBeInstanceOf(UnavailableError);
    expect(new TooManyWaitersError(5, "scope")).toBeInstanceOf(UnavailableError);
    expect(new UnknownOutcomeKeyError(record)).toBeInstanceOf(OutcomeUnknownError);
    expect(isIdemgateError(new ExecutionNotFoundError(), "not_found")).toBe(true);
    for (const err of [new UnavailableError("key_store", new Error("down")), new LeasePassedError(0), new TooManyWaitersError(5)]) {
      const answer = problemAnswer(err);
      expect(answer.status).toBe(503);
      expect(answer.headers["Retry-After"]).toBe("2");
    }
  });

  it("answers outcome_unknown 502 or 504 for the call itself, 409 with the held key for its retries", () => {
    const call = JSON.parse(problemAnswer(new OutcomeUnknownError("k", "e-1", "timed out", true)).body);
    expect(call).toMatchObject({ status: 504, executionId: "e-1", key: "k", state: "unknown" });
    expect(problemAnswer(new OutcomeUnknownError("k", "e-1", "reset", false)).status).toBe(502);
    const retry = JSON.parse(problemAnswer(new UnknownOutcomeKeyError(record)).body);
    expect(retry).toMatchObject({ type: "/problems/outcome_unknown", status: 409, key: "k", tool: "t", state: "unknown" });
    expect(retry.executionId).toBeUndefined();
  });

  it("answers an error whose code is not a problem type 500 internal", () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    expect(problemAnswer(new UnlistedError("x")).status).toBe(500);
    expect(logged).toHaveBeenCalledOnce();
    logged.mockRestore();
  });

  it("is what the server's own answers say, before any route runs (scripts/*.mjs cannot import it)", () => {
    const root = path.resolve(import.meta.dirname, "../..");
    const found: string[] = [];
    for (const file of ["scripts/problem-answers.mjs", "scripts/connection-limits.mjs"]) {
      for (const [, code, title, status] of readFileSync(path.join(root, file), "utf8").matchAll(/problem\("(\w+)", "([^"]+)", (\d+)/g)) {
        found.push(code);
        expect(isProblemCode(code), `${file}: ${code}`).toBe(true);
        if (isProblemCode(code)) expect({ title, status: Number(status) }, `${file}: ${code}`).toEqual({ title: PROBLEMS[code].title, status: PROBLEMS[code].status });
      }
    }
    expect(found).toEqual(expect.arrayContaining(["method_not_allowed", "headers_too_large", "request_timeout", "server_busy"]));
  });
});
