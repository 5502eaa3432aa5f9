export { IdemgateClient, type AttemptEvent, type IdemgateClientOptions, type InvokeOptions, type InvokeResult, type ToolDescription } from "./idemgate-client";
export { IdemgateApiError, NETWORK_PROBLEM_TYPE, OUTCOME_UNKNOWN_PROBLEM_TYPE, OutcomeUnknownError, TIMEOUT_PROBLEM_TYPE, type Problem } from "./errors";
export { DEFAULT_RETRY, type RetryOptions } from "./retry";
export { FinalResultError, guard, idempotent, NotAppliedError, type GuardOptions, type GuardWarning } from "./guard";
