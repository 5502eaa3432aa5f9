// Inside this repository, import "@/lib/client/index": this folder's package.json points at the packed
// build (dist/, made by `npm pack`), which would otherwise stand in for these sources once built.
export { IdemgateClient, type AttemptEvent, type IdemgateClientOptions, type InvokeOptions, type InvokeResult, type ToolDescription } from "./idemgate-client";
export { IdemgateApiError, NETWORK_PROBLEM_TYPE, OUTCOME_UNKNOWN_PROBLEM_TYPE, OutcomeUnknownError, TIMEOUT_PROBLEM_TYPE, TOOL_PAUSED_PROBLEM_TYPE, ToolPausedError, type Problem } from "./errors";
export { DEFAULT_RETRY, type RetryOptions } from "./retry";
export { DEFAULT_REPLAY_CACHE_ENTRIES, type ReplayCacheOptions } from "./replay-cache";
export { FinalResultError, guard, idempotent, NotAppliedError, type DoneAnswer, type GuardOptions, type GuardWarning } from "./guard";
export { ACTION_KEY_PREFIX, actionKey, canonicalJson } from "./action-key";
export { Resolver, runProbe, type HeldCall, type Probe, type ProbeAnswer, type ResolverDecision, type ResolverOptions } from "./resolver";
