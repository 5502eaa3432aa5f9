import { OPERATOR_CALLER_PREFIX } from "@/lib/auth/actor";
import type { KeyArguments, KeyDetail, ResultPrefill, TimelineEvent } from "./get-key-detail";
import { presentKey, tenantOutcomeNote, type KeyView } from "./present-key";

type Jsonified<E> = E extends { at: Date; leaseUntil: Date } ? Omit<E, "at" | "leaseUntil"> & { at: string; leaseUntil: string } : E extends { at: Date } ? Omit<E, "at"> & { at: string } : E;

export type TimelineEventView = Jsonified<TimelineEvent>;

/** A key's detail as GET /api/v1/keys/{scope}/{key} answers it (dates as ISO strings). */
export interface KeyDetailView {
  scope: string;
  key: string;
  record: KeyView | null;
  state: KeyDetail["state"];
  probeable: boolean;
  timeline: TimelineEventView[];
  arguments: KeyArguments | null;
  prefill: (Omit<ResultPrefill, "at"> & { at: string }) | null;
}

export function presentKeyDetail(detail: KeyDetail, nowMs = Date.now()): KeyDetailView {
  const view = { ...detail, record: detail.record ? presentKey(detail.record, nowMs, true) : null };
  return JSON.parse(JSON.stringify(view)) as KeyDetailView;
}

/** An operator action as a tenant sees it: what was done and when, not who did it or why. */
type TenantOperatorEvent = { type: "operator"; at: Date; action: string };
type TenantTimelineEvent = Exclude<TimelineEvent, { type: "operator" }> | TenantOperatorEvent;

/** A key's detail as an API token (a tenant) gets it from GET /api/v1/keys/{scope}/{key}. */
export interface TenantKeyDetailView extends Omit<KeyDetailView, "timeline" | "prefill"> {
  timeline: Jsonified<TenantTimelineEvent>[];
}

/**
 * A key's detail for its tenant. Operators see everything (presentKeyDetail). A tenant sees that an
 * operator (or the reconciler) released or resolved its key and when, but not who, why, or the
 * states recorded with it (which can hold a probe's evidence); and of an outcome's error only what
 * the caller was told: a not-run tool's own message, an unknown outcome's note without an
 * exception's message, nothing from the store; of a call an operator made, that an operator made it.
 * Its own calls' arguments it sees as kept (redacted); never the service's answers an operator
 * resolves from (`prefill`). The key is read in the token's own scope only (visibleScope).
 */
export function presentKeyDetailForTenant(detail: KeyDetail, nowMs = Date.now()): TenantKeyDetailView {
  const view = {
    ...detail,
    // for operators only: dropped by JSON.stringify
    prefill: undefined,
    record: detail.record ? presentKey(detail.record, nowMs, true, "tenant") : null,
    timeline: detail.timeline.map(forTenant),
  };
  return JSON.parse(JSON.stringify(view)) as TenantKeyDetailView;
}

/**
 * Who called, as a tenant may see it: an operator's call from the console is recorded as
 * `operator:<email>`; the tenant learns that an operator called, not who.
 */
export function tenantCaller(caller: string | null): string | null {
  return caller !== null && caller.startsWith(OPERATOR_CALLER_PREFIX) ? "operator" : caller;
}

function forTenant(event: TimelineEvent): TenantTimelineEvent {
  switch (event.type) {
    case "intent":
    case "suppression":
      // token labels are the operators' names for tokens: a tenant sees what it was sent before
      return { ...event, caller: tenantCaller(event.caller), callerName: tenantCaller(event.caller) };
    case "operator":
      return { type: "operator", at: event.at, action: event.action };
    case "closed":
      return { ...event, note: null };
    case "outcome": {
      const error = event.outcome === "failed" ? event.error : event.outcome === "unknown" ? tenantOutcomeNote(event.error) : null;
      return { ...event, error };
    }
    default:
      return event;
  }
}
