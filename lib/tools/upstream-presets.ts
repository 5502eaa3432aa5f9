import type { OutcomeOverride, UpstreamBody } from "./define-tool";

export const PRESET_NAMES = ["stripe", "resend", "adyen", "paypal"] as const;
export type PresetName = (typeof PRESET_NAMES)[number];

/** What a preset sets; a declaration's own fields win (outcomes are merged per status). */
export interface UpstreamPreset {
  body: UpstreamBody;
  keyHeader: string;
  keyMaxLength: number;
  dedupes: true;
  probe: "resend";
  keyRetentionMs: number;
  outcomes: Record<string, OutcomeOverride>;
}

const HOUR_MS = 60 * 60 * 1000;
const DAY_MS = 24 * HOUR_MS;

/**
 * Each provider's published idempotency rules (docs/integrate.md has the table and the reasons).
 * A conflict a provider answers because the key is in use by a request still in progress is
 * unknown, never not run: under Idemgate that request can only be an earlier attempt of the same
 * call, which may be applying its side effect right now, and only a tool's word that nothing
 * happened frees a key.
 */
export const PRESETS: Record<PresetName, UpstreamPreset> = {
  // form bodies with bracketed nesting; keys up to 255 characters, kept 24 h; 409 when the key is
  // in use by a request in progress; a key reused with other parameters is a 400 idempotency_error,
  // which says the key's first request reached Stripe and ran: unknown, never a final error
  stripe: {
    body: "form",
    keyHeader: "Idempotency-Key",
    keyMaxLength: 255,
    dedupes: true,
    probe: "resend",
    keyRetentionMs: DAY_MS,
    outcomes: { "409": "unknown", "400": { outcome: "unknown", when: { "error.type": "idempotency_error" } } },
  },
  // JSON; keys up to 256 characters, kept 24 h; 409 concurrent_idempotent_requests while the first
  // is in progress, and 409 invalid_idempotent_request for the key with another payload (its first
  // request ran): both unknown; a key too long is a 400 invalid_idempotency_key
  resend: { body: "json", keyHeader: "Idempotency-Key", keyMaxLength: 256, dedupes: true, probe: "resend", keyRetentionMs: DAY_MS, outcomes: { "409": "unknown" } },
  // JSON; keys up to 64 characters, kept at least 31 days; 422 with errorCode 704 while the key's
  // first request is in progress (other 422s are validation errors and stay final)
  adyen: { body: "json", keyHeader: "Idempotency-Key", keyMaxLength: 64, dedupes: true, probe: "resend", keyRetentionMs: 31 * DAY_MS, outcomes: { "422": { outcome: "unknown", when: { errorCode: "704" } } } },
  // JSON; the key travels as PayPal-Request-Id (up to 108 characters); how long it is kept differs
  // per API: 6 h, the shortest (Orders v2), unless the declaration says otherwise. A request while
  // the key's first is in progress is refused (422 DUPLICATE_REQUEST_ID, or a 409 conflict): unknown
  paypal: {
    body: "json",
    keyHeader: "PayPal-Request-Id",
    keyMaxLength: 108,
    dedupes: true,
    probe: "resend",
    keyRetentionMs: 6 * HOUR_MS,
    outcomes: { "409": "unknown", "422": { outcome: "unknown", when: { "details.0.issue": "DUPLICATE_REQUEST_ID" } } },
  },
};
