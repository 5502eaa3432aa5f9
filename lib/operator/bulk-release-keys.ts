import { recordOperatorAction } from "@/lib/audit/operator-actions";
import { InvalidArgumentsError, isIdemgateError } from "@/lib/idempotency/errors";
import { requireReason } from "@/lib/audit/operator-actions";
import { releaseKey, type KeyRuntime } from "./release-key";

/** One request releases at most this many keys; the answer says whether more remain. */
export const BULK_RELEASE_LIMIT = 5_000;

/** Keys held until someone decides: what a bulk release acts on. */
export const HELD_STATES = ["stuck", "unknown"] as const;
export type HeldState = (typeof HELD_STATES)[number];

/** a key to release; with `token` (as the operator saw it), only while that reservation holds it */
export interface BulkKey {
  scope: string;
  key: string;
  token?: number;
}

export type BulkTarget =
  | { keys: BulkKey[] }
  /** every key in `state` now (stuck or unknown; both when not given) that matches the filter */
  | { filter: { state?: HeldState; tool?: string; scope?: string; prefix?: string } };

export interface BulkReleaseResult {
  released: number;
  refused: { scope: string; key: string; reason: string }[];
  /** more keys matched than one request releases */
  more: boolean;
}

export async function bulkReleaseKeys(runtime: KeyRuntime, input: BulkTarget & { actor: string; reason: string }): Promise<BulkReleaseResult> {
  const reason = requireReason(input.reason);
  let targets: BulkKey[];
  let more = false;
  if ("keys" in input) {
    if (input.keys.length === 0) throw new InvalidArgumentsError("select at least one key");
    if (input.keys.length > BULK_RELEASE_LIMIT) throw new InvalidArgumentsError(`select at most ${BULK_RELEASE_LIMIT} keys at once`);
    targets = input.keys;
  } else {
    targets = [];
    const { state, ...filter } = input.filter;
    for (const held of state ? [state] : HELD_STATES) {
      let cursor: string | null = null;
      do {
        const page = await runtime.store.list({ ...filter, state: held, limit: 500, cursor, nowMs: Date.now() });
        // each with the token it was listed with: a key another call takes meanwhile is refused
        targets.push(...page.items.map((r) => ({ scope: r.scope, key: r.key, token: r.token })));
        cursor = page.nextCursor;
      } while (cursor && targets.length < BULK_RELEASE_LIMIT);
      more ||= cursor !== null;
      if (targets.length >= BULK_RELEASE_LIMIT) break;
    }
    more ||= targets.length > BULK_RELEASE_LIMIT;
    targets = targets.slice(0, BULK_RELEASE_LIMIT);
  }
  const refused: BulkReleaseResult["refused"] = [];
  let released = 0;
  for (const target of targets) {
    try {
      // never forced: a call still running is refused ("running") and listed, not released
      await releaseKey(runtime, { ...target, actor: input.actor, reason });
      released++;
    } catch (err) {
      if (!isIdemgateError(err)) throw err;
      refused.push({ scope: target.scope, key: target.key, reason: err.message });
    }
  }
  await recordOperatorAction(runtime.db.prisma, {
    actor: input.actor,
    action: "bulk_release",
    reason,
    before: "keys" in input ? { selected: input.keys.length } : { filter: input.filter },
    after: { released, refused: refused.length, more },
  });
  return { released, refused, more };
}
