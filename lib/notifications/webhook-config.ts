import { z } from "zod";

/** What an endpoint can be told of (DESIGN.md § Key states; anomalies: lib/anomalies). */
export const WEBHOOK_EVENTS = ["key.unknown", "key.stuck", "anomaly.opened", "tool.paused", "tool.resumed"] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENTS)[number];

/** `idemgate`: the event as JSON, signed; `slack`: a Slack incoming-webhook message (`text` and `blocks`), signed too. */
export const WEBHOOK_FORMATS = ["idemgate", "slack"] as const;
export type WebhookFormat = (typeof WEBHOOK_FORMATS)[number];

/** A secret shorter than this is refused: it is all that stands between a receiver and a forged event. */
export const MIN_SECRET_LENGTH = 16;

const ms = z.number().int("must be a whole number of milliseconds").positive("must be a positive number of milliseconds");

/**
 * One endpoint of a configuration file's `webhooks:`. Its `secret` must come from the environment
 * (`${NAME}`): lib/tools/config-file.ts refuses one written into the file.
 */
export const webhookEndpointSchema = z.strictObject({
  name: z.string().regex(/^[a-z][a-z0-9_.-]{0,62}$/, "lower-case letters, digits, _ . and -, starting with a letter (it names the endpoint in the delivery log)"),
  url: z.url({ protocol: /^https?$/, message: "must be an http or https URL" }),
  secret: z.string().min(MIN_SECRET_LENGTH, `must be at least ${MIN_SECRET_LENGTH} characters`),
  events: z.array(z.enum(WEBHOOK_EVENTS)).min(1, "must name at least one event").default([...WEBHOOK_EVENTS]),
  format: z.enum(WEBHOOK_FORMATS).default("idemgate"),
  /** how long one attempt may take (default 10 s) */
  timeoutMs: ms.max(60_000, "must be at most 60000 (one minute)").default(10_000),
  /** attempts before a delivery is given up as failed (default 10) */
  maxAttempts: z.number().int().min(1).max(30).default(10),
  /** the wait before the first retry; doubled after every failed attempt, at most an hour (default 5 s) */
  retryBackoffMs: ms.default(5_000),
});

export type WebhookEndpoint = z.output<typeof webhookEndpointSchema> & {
  /** the `url` as written when parts of it came from the environment (shown masked in the console); else absent */
  urlTemplate?: string;
};

/** The longest wait between two attempts. */
export const MAX_BACKOFF_MS = 3_600_000;

/** The wait after the n-th failed attempt (1-based): retryBackoffMs doubled per attempt, at most an hour, plus up to 10 % jitter. */
export function backoffMs(endpoint: Pick<WebhookEndpoint, "retryBackoffMs">, failedAttempts: number, random: () => number = Math.random): number {
  const base = Math.min(endpoint.retryBackoffMs * 2 ** Math.max(0, failedAttempts - 1), MAX_BACKOFF_MS);
  return Math.round(base * (1 + 0.1 * random()));
}
