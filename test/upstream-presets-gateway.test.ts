import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as invokeRoute } from "@/app/api/v1/tools/[tool]/invoke/route";
import { createApiToken } from "@/lib/auth/api-tokens";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { parseToolConfig } from "@/lib/tools/config-file";
import { ToolRegistry } from "@/lib/tools/registry";
import { derivedKey } from "@/lib/tools/upstream";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { IdempotentProvider, PAYPAL, STRIPE } from "@/test/support/idempotent-provider";
import { installTestRuntime } from "@/test/support/runtime";

// The gateway's /invoke route over a real runtime, forwarding to local services that deduplicate as
// Stripe and PayPal document: what a caller sees for a bad path argument, a lost answer and its retry.
const stripe = new IdempotentProvider(STRIPE);
const paypal = new IdempotentProvider(PAYPAL);

const CONFIG = `
tools:
  - name: stripe.create_payment_intent
    description: Create a PaymentIntent
    leaseMs: 5000
    upstream: { preset: stripe, url: "\${STRIPE}/v1/payment_intents", timeoutMs: 1000 }
  - name: paypal.capture_order
    description: Capture a PayPal order
    leaseMs: 5000
    inputSchema: { type: object, required: [orderId], properties: { orderId: { type: string }, note_to_payer: { type: string } } }
    upstream: { preset: paypal, url: "\${PAYPAL}/v2/checkout/orders/{orderId}/capture", timeoutMs: 1000 }
`;

let pg: TestPostgres;
let runtime: Runtime;
let token: string;
const SCOPE = `tenant-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  const env = { STRIPE: await stripe.start(), PAYPAL: await paypal.start() };
  pg = await createTestPostgres("upstream_presets");
  runtime = installTestRuntime({ db: pg.db, store: new SqlKeyStore(pg.db), registry: new ToolRegistry(parseToolConfig(CONFIG, "idemgate.config.yaml", env).tools) });
  token = (await createApiToken(pg.db.prisma, { scope: SCOPE, label: "preset tests", actor: "test" })).token;
});

afterAll(async () => {
  await runtime?.close();
  await pg?.drop();
  await Promise.all([stripe.stop(), paypal.stop()]);
});

async function invoke(tool: string, key: string, args: unknown): Promise<{ status: number; type: string | null; body: Record<string, unknown> }> {
  const request = new Request(`http://gateway.invalid/api/v1/tools/${tool}/invoke`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "idempotency-key": key },
    body: JSON.stringify(args),
  });
  const response = await invokeRoute(request, { params: Promise.resolve({ tool }) });
  return { status: response.status, type: response.headers.get("content-type"), body: (await response.json()) as Record<string, unknown> };
}

describe("preset tools through the gateway", () => {
  it("a call without its path argument is a 400 invalid_arguments problem: nothing is sent, no key is held", async () => {
    const out = await invoke("paypal.capture_order", "no-order", { note_to_payer: "thanks" });
    expect(out.status).toBe(400);
    expect(out.type).toMatch(/^application\/problem\+json/);
    expect(out.body).toMatchObject({ type: expect.stringMatching(/invalid[_-]arguments/) });
    expect(JSON.stringify(out.body)).toMatch(/orderId/);
    expect(paypal.received).toHaveLength(0);
    expect(await runtime.store.get(SCOPE, "no-order")).toBeNull();
    // with it, the call goes through, its value encoded as one path segment
    const ok = await invoke("paypal.capture_order", "no-order", { orderId: "a/b?c", note_to_payer: "thanks" });
    expect(ok.status).toBe(200);
    expect(paypal.received.map((r) => r.url)).toEqual(["/v2/checkout/orders/a%2Fb%3Fc/capture"]);
  });

  it("stripe: an answer lost after the charge, then the caller's retry with the same key: one charge, the retry gets it", async () => {
    stripe.next("lose_answer");
    const first = await invoke("stripe.create_payment_intent", "order-7", { amount: 2000, currency: "eur", metadata: { order: "7" } });
    expect(first.status).toBe(502);
    const retry = await invoke("stripe.create_payment_intent", "order-7", { amount: 2000, currency: "eur", metadata: { order: "7" } });
    expect(retry.status).toBe(200);
    expect(retry.body).toMatchObject({ id: "stripe_1" });
    const again = await invoke("stripe.create_payment_intent", "order-7", { amount: 2000, currency: "eur", metadata: { order: "7" } });
    expect(again).toMatchObject({ status: 200, body: { id: "stripe_1" } });
    expect(stripe.effects).toHaveLength(1);
    expect(stripe.effects[0].request).toEqual([["amount", "2000"], ["currency", "eur"], ["metadata[order]", "7"]]);
    expect(stripe.received.map((r) => r.key)).toEqual([derivedKey(SCOPE, "order-7"), derivedKey(SCOPE, "order-7")]);
  });
});
