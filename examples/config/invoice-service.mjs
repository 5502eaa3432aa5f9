// A small invoice service for examples/idemgate.config.yaml: the HTTP service behind the
// billing.create_invoice tool. It checks the bearer token Idemgate forwards, honours the
// Idempotency-Key it sends (a resend gets the first invoice back), and answers the status probe.
//   EXAMPLE_BILLING_TOKEN=dev-token node examples/config/invoice-service.mjs     (port 4400, or PORT)
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";

const port = Number(process.env.PORT ?? 4400);
const token = process.env.EXAMPLE_BILLING_TOKEN ?? "dev-token";
const invoices = new Map(); // Idempotency-Key -> invoice

const send = (res, status, body) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));

createServer(async (req, res) => {
  if (req.headers.authorization !== `Bearer ${token}`) return send(res, 401, { error: "bad token" });
  const key = req.headers["idempotency-key"];
  if (req.method === "GET" && req.url === "/status") {
    const invoice = invoices.get(key);
    return send(res, 200, invoice ? { outcome: "applied", status: 201, body: invoice } : { outcome: "not_applied" });
  }
  if (req.method !== "POST" || req.url !== "/invoices") return send(res, 404, { error: "not found" });
  let text = "";
  for await (const chunk of req) text += chunk;
  if (invoices.has(key)) return send(res, 201, invoices.get(key));
  const { customerId, amountCents } = JSON.parse(text);
  const invoice = { invoiceId: `inv_${randomUUID().slice(0, 8)}`, customerId, amountCents, createdAt: new Date().toISOString() };
  invoices.set(key, invoice);
  console.log(`invoice ${invoice.invoiceId} for ${customerId}: ${amountCents} (key ${key})`);
  send(res, 201, invoice);
}).listen(port, "127.0.0.1", () => console.log(`invoice service on http://127.0.0.1:${port}`));
