import { IdemgateError } from "@/lib/idempotency/errors";
import { PROBLEMS, type ProblemCode } from "@/lib/problems/problems";

/**
 * Errors of the HTTP layer itself, before the engine is asked (or beside it: saved views, probes):
 * one class per problem code, each answered with its type's status (lib/problems).
 */
export abstract class HttpError extends IdemgateError {
  abstract override readonly code: ProblemCode;

  constructor(
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.problem = { headers };
  }

  /** the status it is answered with: its problem type's */
  get status(): number {
    return PROBLEMS[this.code].status;
  }
}

export class UnauthorizedError extends HttpError {
  readonly code = "unauthorized";
}

export class ForbiddenError extends HttpError {
  readonly code = "forbidden";
}

export class InvalidRequestError extends HttpError {
  readonly code = "invalid_request";
}

/** A header Idemgate reads has an invalid value, or was sent more than once. */
export class InvalidHeaderError extends HttpError {
  readonly code = "invalid_header";
}

export class InvalidJsonError extends HttpError {
  readonly code = "invalid_json";
}

export class UnsupportedMediaTypeError extends HttpError {
  readonly code = "unsupported_media_type";
}

export class PayloadTooLargeError extends HttpError {
  readonly code = "payload_too_large";
}

/** A saved view's name the operator already gave another view of the page. */
export class NameTakenError extends HttpError {
  readonly code = "name_taken";
}

/** An operator already keeps as many saved views of a page as one may. */
export class LimitReachedError extends HttpError {
  readonly code = "limit_reached";
}

/** The call a probe was claimed or answered for is no longer held. */
export class NotHeldError extends HttpError {
  readonly code = "not_held";
}

/** Retry-After, in whole seconds (at least 1), until `untilMs`. */
function retryAfter(untilMs: number, nowMs: number): Record<string, string> {
  return { "Retry-After": String(Math.max(1, Math.ceil((untilMs - nowMs) / 1000))) };
}

/** Another process holds a live claim on the held call's probe (or it waits out a backoff) until `untilMs`. */
export class ProbeClaimedError extends HttpError {
  readonly code = "probe_claimed";
  constructor(detail: string, untilMs: number, nowMs: number) {
    super(detail, retryAfter(untilMs, nowMs));
  }
}

/** "Not applied" for a call whose lease lasts until `untilMs`: it may still be running. */
export class LeaseRunningError extends HttpError {
  readonly code = "lease_running";
  constructor(detail: string, untilMs: number, nowMs: number) {
    super(detail, retryAfter(untilMs, nowMs));
  }
}
