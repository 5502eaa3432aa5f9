import type { CompleteOptions, CompleteOutcome, OperatorGuard, OperatorOutcome } from "@/lib/idempotency/key-store";
import type { StoredResult } from "@/lib/idempotency/record";
import type { HolderChange, OperatorChange } from "@/lib/idempotency/transitions";

/**
 * The KeyStore methods that change a reserved key, for a store that applies the rules'
 * changes (lib/idempotency/transitions.ts) itself: each names its change, and the store fills in
 * the two ways a change is made, by the reservation's holder and by an operator.
 */
export abstract class RuleChanges {
  /** applies `change` if the holder of `token` may make it (holderRefusal), or says why not */
  protected abstract changeHeld(scope: string, key: string, token: number, change: HolderChange): Promise<CompleteOutcome>;
  /** applies `change` if the operator may make it (operatorRefusal), or says why not */
  protected abstract changeByOperator(scope: string, key: string, guard: OperatorGuard, change: OperatorChange): Promise<OperatorOutcome>;

  complete(scope: string, key: string, token: number, result: StoredResult, ttlMs: number, nowMs: number, options: CompleteOptions = {}): Promise<CompleteOutcome> {
    return this.changeHeld(scope, key, token, { kind: "complete", result, ttlMs, nowMs, executionId: options.executionId });
  }

  async abandon(scope: string, key: string, token: number): Promise<boolean> {
    return (await this.changeHeld(scope, key, token, { kind: "abandon" })).ok;
  }

  markUnknown(scope: string, key: string, token: number, note: string, nowMs: number, options: CompleteOptions = {}): Promise<CompleteOutcome> {
    return this.changeHeld(scope, key, token, { kind: "markUnknown", note, nowMs, executionId: options.executionId });
  }

  extendLease(scope: string, key: string, token: number, leaseUntilMs: number): Promise<CompleteOutcome> {
    return this.changeHeld(scope, key, token, { kind: "extendLease", leaseUntilMs });
  }

  release(scope: string, key: string, guard: OperatorGuard): Promise<OperatorOutcome> {
    return this.changeByOperator(scope, key, guard, { kind: "release" });
  }

  resolve(scope: string, key: string, result: StoredResult, ttlMs: number, guard: OperatorGuard): Promise<OperatorOutcome> {
    return this.changeByOperator(scope, key, guard, { kind: "resolve", result, ttlMs });
  }
}
