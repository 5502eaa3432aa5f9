import type { WebhookEndpoint } from "./webhook-config";

// on globalThis: the server's start-up (which reads the configuration file) and the console's pages
// are separate bundles of this module
const holder = globalThis as unknown as { __idemgateWebhookEndpoints?: readonly WebhookEndpoint[] };

/** The configuration file's `webhooks:` as now served (set at start and on every accepted reload). */
export function setWebhookEndpoints(endpoints: readonly WebhookEndpoint[]): void {
  holder.__idemgateWebhookEndpoints = endpoints;
}

/** The endpoints events are queued for and delivered to; none until a configuration file declares some. */
export function webhookEndpoints(): readonly WebhookEndpoint[] {
  return holder.__idemgateWebhookEndpoints ?? [];
}

/** An endpoint as the console shows it: the secret never, the URL with the parts from the environment masked. */
export interface EndpointView {
  name: string;
  url: string;
  format: WebhookEndpoint["format"];
  events: WebhookEndpoint["events"];
  maxAttempts: number;
  retryBackoffMs: number;
  timeoutMs: number;
}

export function endpointView(e: WebhookEndpoint): EndpointView {
  const url = e.urlTemplate ? e.urlTemplate.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, "${$1: ••••••}") : e.url;
  return { name: e.name, url, format: e.format, events: e.events, maxAttempts: e.maxAttempts, retryBackoffMs: e.retryBackoffMs, timeoutMs: e.timeoutMs };
}
