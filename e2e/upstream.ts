import { testPort } from "../scripts/test-ports.mjs";

/** The port of the HTTP service the e2e tests start (e2e/upstream-service.ts); the e2e servers forward two tools to it. */
export const UPSTREAM_PORT = testPort(4311);

const base = `http://127.0.0.1:${UPSTREAM_PORT}`;

/**
 * - `billing.create_invoice`: answers within 1.5 s or its outcome is unknown; no status probe, so an
 *   operator decides every unknown outcome.
 * - `billing.export_ledger`: may take 20 s (its lease is the default minute), and answers a status
 *   probe, so "Ask the tool" can settle its keys.
 */
export const UPSTREAM_TOOLS = JSON.stringify([
  { name: "billing.create_invoice", url: `${base}/invoices`, timeoutMs: 1_500 },
  { name: "billing.export_ledger", url: `${base}/exports`, timeoutMs: 20_000, statusUrl: `${base}/status` },
]);

/** The secrets e2e/idemgate.config.yaml takes from the environment; the console must never show them. */
export const CONFIG_SECRETS = { apiKey: "e2e-crm-api-key-9f3c", token: "e2e-crm-token-51ab" };
