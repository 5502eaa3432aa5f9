/** The port of the HTTP service the gateway tests start; the e2e servers forward `billing.create_invoice` to it. */
export const UPSTREAM_PORT = 4311;

export const UPSTREAM_TOOLS = JSON.stringify([
  { name: "billing.create_invoice", url: `http://127.0.0.1:${UPSTREAM_PORT}/invoices`, timeoutMs: 1_500 },
]);
