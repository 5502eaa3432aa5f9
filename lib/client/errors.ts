/** RFC 9457 problem details as the gateway sends them (extension members included). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail?: string;
  instance?: string;
  [extension: string]: unknown;
}

/**
 * The gateway refused or could not finish the call (a problem+json answer, after any retries), or
 * it could not be reached at all (`status` 0, `type` "about:blank#network"). A tool's own final
 * error (a declined card) is a result, not this.
 */
export class IdemgateApiError extends Error {
  readonly status: number;
  readonly type: string;
  readonly title: string;
  readonly detail: string | undefined;

  constructor(
    readonly problem: Problem,
    /** the Idempotency-Key the call was sent with (null: none) */
    readonly key: string | null,
    /** how many HTTP requests were sent for this call */
    readonly attempts: number,
    options?: { cause?: unknown },
  ) {
    super(problem.detail ? `${problem.title}: ${problem.detail}` : problem.title, options);
    this.name = "IdemgateApiError";
    this.status = problem.status;
    this.type = problem.type;
    this.title = problem.title;
    this.detail = problem.detail;
  }

  /** The problem code, e.g. "conflict" for `/problems/conflict`; null for foreign problem types. */
  get code(): string | null {
    const match = /^\/problems\/([a-z_]+)$/.exec(this.type);
    return match ? match[1] : null;
  }
}

export const NETWORK_PROBLEM_TYPE = "about:blank#network";
export const TIMEOUT_PROBLEM_TYPE = "about:blank#timeout";
