import { redactValue } from "@/lib/idempotency/redaction";
import { PUBLIC_THREW_NOTE, publicOutcomeNote } from "@/lib/idempotency/outcome-note";
import { stateOf, type KeyRecord, type KeyState } from "@/lib/idempotency/record";

/** A key record as the API and the console show it: with its derived state, times as ISO strings. */
export interface KeyView {
  scope: string;
  key: string;
  tool: string;
  state: KeyState;
  fingerprint: string;
  token: number;
  fallback: boolean;
  session: string | null;
  executionId: string | null;
  createdAt: string;
  leaseUntil: string | null;
  completedAt: string | null;
  expiresAt: string | null;
  /** unknown keys: why the outcome is unknown ("timed out after 400 ms", "the service answered 502") */
  outcomeNote: string | null;
  /** unknown keys: when the outcome became unknown */
  unknownAt: string | null;
  /** lists: the stored result's HTTP status (done and expired keys), from the audit log */
  resultStatus?: number | null;
  /** lists: how many duplicates were answered with the stored result */
  replays?: number;
  /** only in single-key views; lists leave payloads out */
  result?: { status: number; final: boolean; body: unknown } | null;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** Who a view is for: an operator (console session) sees everything, a tenant (API token) not the internals. */
/** One page of GET /api/v1/keys. */
export interface KeyPage {
  items: KeyView[];
  nextCursor: string | null;
}

export type Audience = "operator" | "tenant";

/** An unknown outcome's note as a tenant may read it: an exception's message stays with operators. */
export const tenantOutcomeNote = (note: string | null): string | null => publicOutcomeNote(note);
export { PUBLIC_THREW_NOTE };

export function presentKey(record: KeyRecord, nowMs: number, withResult = false, audience: Audience = "operator"): KeyView {
  const view: KeyView = {
    scope: record.scope,
    key: record.key,
    tool: record.tool,
    state: stateOf(record, nowMs),
    fingerprint: record.fingerprint,
    token: record.token,
    fallback: record.fallback,
    session: record.session,
    executionId: record.executionId,
    createdAt: new Date(record.createdAtMs).toISOString(),
    leaseUntil: iso(record.leaseUntilMs),
    completedAt: iso(record.completedAtMs),
    expiresAt: iso(record.expiresAtMs),
    outcomeNote: audience === "tenant" ? tenantOutcomeNote(record.outcomeNote ?? null) : (record.outcomeNote ?? null),
    unknownAt: iso(record.unknownAtMs ?? null),
  };
  if (withResult) {
    // a tenant reads its own results; operators see them without the secrets they may hold
    const body = (text: string) => (audience === "operator" ? redactValue(parseBody(text)) : parseBody(text));
    view.result = record.result ? { status: record.result.status, final: record.result.final, body: body(record.result.body) } : null;
  }
  return view;
}

function parseBody(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return body;
  }
}
