import { testPort } from "../scripts/test-ports.mjs";

/**
 * The port of the HTTP service the e2e tests start (e2e/upstream-service.ts) for one server
 * configuration: each configuration's server forwards its two tools to a service of its own, so that
 * the configurations' tests can run at the same time.
 */
export const UPSTREAM_PORTS = { embedded: testPort(4311), servers: testPort(4313), "redis-down": testPort(4315) } as const;
export type ServerConfiguration = keyof typeof UPSTREAM_PORTS;

/** The service's port for the project a test runs in (its name is the configuration's). */
export function upstreamPortOf(project: string): number {
  const port = UPSTREAM_PORTS[project as ServerConfiguration];
  if (port === undefined) throw new Error(`no upstream service port for the Playwright project ${project}`);
  return port;
}

/**
 * - `billing.create_invoice`: answers within 1.5 s or its outcome is unknown; no status probe, so an
 *   operator decides every unknown outcome.
 * - `billing.export_ledger`: may take 20 s (its lease is the default minute), and answers a status
 *   probe, so "Ask the tool" can settle its keys.
 */
export function upstreamTools(configuration: ServerConfiguration): string {
  const base = `http://127.0.0.1:${UPSTREAM_PORTS[configuration]}`;
  return JSON.stringify([
    { name: "billing.create_invoice", url: `${base}/invoices`, timeoutMs: 1_500 },
    { name: "billing.export_ledger", url: `${base}/exports`, timeoutMs: 20_000, statusUrl: `${base}/status` },
  ]);
}

/** The secrets e2e/idemgate.config.yaml takes from the environment; the console must never show them. */
export const CONFIG_SECRETS = { apiKey: "e2e-crm-api-key-9f3c", token: "e2e-crm-token-51ab" };
