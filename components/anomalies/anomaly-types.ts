import type { AnomalyStatus } from "@/lib/anomalies/anomalies";
import type { AnomalyType } from "@/lib/anomalies/reconcile";

// The lists are repeated here rather than imported: lib/anomalies pulls server code (Prisma,
// node:crypto) into whatever imports its values, and these are needed in client components too.
// `satisfies` below keeps them in step with the backend's types.

export const STATUSES = ["open", "acknowledged", "resolved"] as const satisfies readonly AnomalyStatus[];

export interface AnomalyTypeInfo {
  label: string;
  /** one line: what happened and why it matters */
  explanation: string;
  /** what the reconciler watches for, for the empty state */
  watches: string;
  /** what an operator should do about one */
  todo: string;
  orphan: boolean;
}

export const TYPE_INFO = {
  orphan_unknown_outcome: {
    label: "Unknown outcome",
    explanation:
      "A call never reported back, or ended without knowing whether it worked (a timeout, a 5xx, an exception); its side effect may or may not have happened.",
    watches: "calls that started and never reported an outcome after their lease passed, and calls whose outcome is unknown",
    todo:
      "Open the key. If its tool can be asked, choose Ask the tool: its answer settles the key. Otherwise check the downstream system (for a payment: the PSP's dashboard) for this key's action. If the side effect exists, choose It happened and enter its result, so retries get that result instead of running it again. If it does not, choose It did not happen, so the next retry runs it. Either decision closes this anomaly.",
    orphan: true,
  },
  orphan_lost_completion: {
    label: "Lost completion",
    explanation: "A call succeeded but the key store has no done record of it; a retry would run the side effect again.",
    watches: "succeeded calls whose done record is missing from the key store",
    todo:
      "Look at the key's timeline for a second execution after this one: if a retry already ran the side effect again, reverse the duplicate (for a charge: refund it). Then find why the store lost the record (a restart without persistence, a failover, eviction under memory pressure) and fix that before resolving this anomaly.",
    orphan: true,
  },
  orphan_late_completion: {
    label: "Late completion",
    explanation: "A call finished after its reservation was released or taken over; the side effect may have run twice.",
    watches: "completions refused because their reservation had been released or taken over",
    todo:
      "Check the key's timeline for another execution around the same time. If there is one, the side effect happened twice: reverse one of them. If calls to this tool regularly outlive their lease, lengthen the tool's lease.",
    orphan: true,
  },
  orphan_unrecorded_effect: {
    label: "Unrecorded side effect",
    explanation: "A tool committed a side effect with no execution in the audit log; nothing guards it against a repeat.",
    watches: "side effects in the tools' own tables with no execution in the audit log",
    todo:
      "Find who caused it: a caller that bypassed the gateway, or an intent lost from the audit log (possible in the async audit mode). Check whether the action was repeated, and route that caller through the gateway with an idempotency key.",
    orphan: true,
  },
  stale_suppression: {
    label: "Stale suppression",
    explanation: "A call was answered as a duplicate but was probably a new action; the caller got an old result and nothing happened.",
    watches: "replays answered to another session, long after the tool's usual retries, or through a fallback (arguments-only) key",
    todo:
      "Ask whether the caller meant a new action. If it did, it is reusing idempotency keys (for example one per conversation instead of one per action): it should mint one key per logical action, and redo this action with a fresh key. For a fallback-key suppression, shorten the tool's fallback-dedupe window or have the caller send keys.",
    orphan: false,
  },
  fresh_key_duplicate: {
    label: "Fresh-key duplicate",
    explanation:
      "A tool ran twice for identical arguments under two different keys within its retry window: probably one action retried under a fresh key, so its side effect happened twice.",
    watches: "identical calls of one tool in one scope under different keys, closer together than the tool's retries",
    todo:
      "Compare the two executions below (sessions, callers, results). If the caller meant one action, it is a duplicate that got through: reverse the second side effect (for a charge: refund it), have the caller reuse its key when it retries (or send model-minted keys with Idemgate-Key-Source: model, so identical calls within the window are answered as duplicates), and choose A duplicate that got through. If the caller really meant the same action twice, choose A genuine repeat.",
    orphan: false,
  },
  result_over_scope_limit: {
    label: "Result over the tenant's limit",
    explanation:
      "A tenant's stored results reached their limit (IDEMGATE_SCOPE_RESULT_BYTES): its completions are done, but their results are stored as a placeholder, so its retries get the placeholder, not the result.",
    watches: "completions stored as a placeholder because their scope held its limit of stored result bytes",
    todo:
      "Look at the tenant's figure in idemgate_scope_result_bytes: a tool answering far more than it needs to (trim its answers), a tenant storing results long (shorten the tool's ttlMs), or a limit too low for its traffic (raise IDEMGATE_SCOPE_RESULT_BYTES). The calls are done and never run again either way.",
    orphan: false,
  },
  key_store_loss: {
    label: "Key-store loss",
    explanation:
      "The key store lost done records (a restart without persistence, a flush, a failover). One incident per loss: records whose result the audit log gives back need nobody; the others are listed, each with an anomaly of its own.",
    watches: "done records missing from the key store within their TTL, grouped by loss",
    todo:
      "If every record was restored, retries get their results back and nothing runs again: find why the store lost its data (persistence, eviction, failover) and fix that, then resolve this incident. Otherwise open each key listed as not restored and decide it as its own anomaly says.",
    orphan: true,
  },
} as const satisfies Record<AnomalyType, AnomalyTypeInfo>;

export const TYPES = Object.keys(TYPE_INFO) as AnomalyType[];

export function typeInfo(type: string): AnomalyTypeInfo {
  return (TYPE_INFO as Record<string, AnomalyTypeInfo>)[type] ?? { label: type, explanation: "", watches: "", todo: "", orphan: false };
}

export const anomalyHref = (id: string) => `/anomalies/${encodeURIComponent(id)}`;
