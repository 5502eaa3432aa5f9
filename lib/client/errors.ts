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

export const OUTCOME_UNKNOWN_PROBLEM_TYPE = "/problems/outcome_unknown";

/**
 * The action may or may not have happened (`/problems/outcome_unknown`): the tool timed out, its
 * service answered 5xx, the connection broke after the request was sent, or an in-process tool
 * threw. The gateway holds the key in state `unknown` and will not run the action again with it
 * until the tool's status probe or an operator decides (it happened: resolved, and a retry then
 * gets the stored result; it did not: released, and a retry runs it).
 *
 * The client never retries this answer. Do not retry with a new key either: that is a second
 * action. Keep `key` (and `executionId`) to look the call up in the console or to retry later
 * with the same key.
 *
 * - `status` 502 or 504 (a timeout): this call's own execution ended without an outcome;
 *   `executionId` names it.
 * - `status` 409: an earlier call with this key ended that way (possibly this invoke()'s own first
 *   attempt, when its answer was lost to a client timeout or a broken connection); `executionId`
 *   is null.
 */
export class OutcomeUnknownError extends IdemgateApiError {
  /** the key the gateway holds: the one sent, or the `fallback:` key of a keyless call */
  declare readonly key: string | null;
  /** the execution whose outcome is unknown, when this answer came from it (null on a 409) */
  readonly executionId: string | null;

  constructor(problem: Problem, key: string | null, executionId: string | null, attempts: number) {
    super(problem, key, attempts);
    this.name = "OutcomeUnknownError";
    this.executionId = executionId;
  }
}

export const TOOL_PAUSED_PROBLEM_TYPE = "/problems/tool_paused";

/**
 * An operator paused the tool (`/problems/tool_paused`, 503): the call was refused before anything
 * was reserved, so the action did not happen (guard() did not run the function). The client does
 * not retry it: send it again with the same key once the tool is resumed.
 */
export class ToolPausedError extends IdemgateApiError {
  /** why the operator paused the tool, as the answer says */
  readonly reason: string | null;
  readonly tool: string | null;

  constructor(problem: Problem, key: string | null, attempts: number) {
    super(problem, key, attempts);
    this.name = "ToolPausedError";
    this.reason = typeof problem.reason === "string" ? problem.reason : null;
    this.tool = typeof problem.tool === "string" ? problem.tool : null;
  }
}

export const NETWORK_PROBLEM_TYPE = "about:blank#network";
export const TIMEOUT_PROBLEM_TYPE = "about:blank#timeout";
