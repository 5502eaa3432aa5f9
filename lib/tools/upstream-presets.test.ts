import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { InvalidArgumentsError, OutcomeUnknownError } from "@/lib/idempotency/errors";
import { probeKey } from "@/lib/operator/probe-key";
import { releaseKey } from "@/lib/operator/release-key";
import { resolveKey } from "@/lib/operator/resolve-key";
import { useEngineFixture } from "@/test/support/engine-fixture";
import { ADYEN, IdempotentProvider, PAYPAL, RESEND, STRIPE, type ProviderRules } from "@/test/support/idempotent-provider";
import { parseToolConfig } from "./config-file";
import type { ToolDefinition } from "./define-tool";
import { ToolRegistry } from "./registry";
import { prismaResendLog } from "./resend-log";
import { upstreamToolsFromEnv } from "./upstream-from-env";
import { derivedKey } from "./upstream";
import { fitKey } from "./upstream-request";

// Each preset against a local service that plays its provider's published idempotency rules,
// called by a real engine over HTTP, with the tools declared in a configuration file.
const providers = {
  stripe: new IdempotentProvider(STRIPE),
  resend: new IdempotentProvider(RESEND),
  adyen: new IdempotentProvider(ADYEN),
  paypal: new IdempotentProvider(PAYPAL),
  // a provider that takes keys of at most 32 characters, declared with keyMaxLength
  short: new IdempotentProvider({ ...ADYEN, name: "short", keyMaxLength: 32 }),
  // a provider that answers a key's request to another URL with 404 (an edited URL)
  edited: new IdempotentProvider({ ...RESEND, name: "edited", mismatch: { status: 404, body: { error: "not found" } } }),
};

const CONFIG = `
tools:
  - name: stripe.create_payment_intent
    description: Create a PaymentIntent
    leaseMs: 5000
    upstream: { preset: stripe, url: "\${STRIPE}/v1/payment_intents", timeoutMs: 400 }
  - name: resend.send_email
    description: Send an email
    leaseMs: 5000
    upstream: { preset: resend, url: "\${RESEND}/emails", timeoutMs: 400 }
  - name: adyen.payments
    description: Make a payment
    leaseMs: 5000
    upstream: { preset: adyen, url: "\${ADYEN}/v71/payments", timeoutMs: 400 }
  - name: short.payments
    description: Make a payment at a provider taking short keys
    leaseMs: 5000
    upstream: { preset: adyen, url: "\${SHORT}/v71/payments", timeoutMs: 400, keyMaxLength: 32 }
  - name: edited.send_email
    description: Send an email at a provider answering an edited URL with 404
    leaseMs: 5000
    upstream: { preset: resend, url: "\${EDITED}/emails", timeoutMs: 400 }
  - name: paypal.capture_order
    description: Capture a PayPal order
    leaseMs: 5000
    inputSchema: { type: object, required: [orderId], properties: { orderId: { type: string } } }
    upstream: { preset: paypal, url: "\${PAYPAL}/v2/checkout/orders/{orderId}/capture", timeoutMs: 400 }
`;

describe("upstream presets against services that deduplicate as their providers document", () => {
  const t = useEngineFixture("redis");
  let registry: ToolRegistry;
  // the same tools after their declarations changed while keys were unknown
  let edited: ToolRegistry;
  const runtime = () => ({ db: t.db, store: t.store, engine: t.engine, registry });

  beforeAll(async () => {
    const env: Record<string, string> = {};
    for (const [name, provider] of Object.entries(providers)) env[name.toUpperCase()] = await provider.start();
    registry = new ToolRegistry(parseToolConfig(CONFIG, "idemgate.config.yaml", env).tools);
    const changed = CONFIG.replace("/v1/payment_intents", "/v1/payment_intents?expand=x").replace("${EDITED}/emails", "${EDITED}/emails/batch").replace('${RESEND}/emails"', '${RESEND}/emails/batch"');
    edited = new ToolRegistry(parseToolConfig(changed, "idemgate.config.yaml", env).tools);
  });
  afterAll(async () => {
    await Promise.all(Object.values(providers).map((p) => p.stop()));
  });

  const scope = () => `preset-${randomUUID().slice(0, 8)}`;
  const call = (tool: ToolDefinition, s: string, key: string, args: Record<string, unknown>) =>
    t.engine.invoke(tool, registry.runnerFor(tool, t.db.prisma), { scope: s, key, args: registry.parseArgs(tool, args) });

  const cases: { preset: keyof typeof providers; tool: string; args: Record<string, unknown>; inProgress: boolean }[] = [
    { preset: "stripe", tool: "stripe.create_payment_intent", args: { amount: 2000, currency: "eur" }, inProgress: true },
    { preset: "resend", tool: "resend.send_email", args: { from: "a@example.com", to: ["b@example.com"], subject: "hi" }, inProgress: true },
    { preset: "adyen", tool: "adyen.payments", args: { amount: { value: 2000, currency: "EUR" }, reference: "r1" }, inProgress: true },
    { preset: "paypal", tool: "paypal.capture_order", args: { orderId: "5O190127TN364715T" }, inProgress: true },
  ];

  describe.each(cases)("$preset", ({ preset, tool: toolName, args }) => {
    const provider = providers[preset];
    const tool = () => registry.get(toolName);
    const keyAt = (s: string, key: string) => derivedKey(s, key);

    it("a retry after a lost answer is sent with the same key and gets the provider's stored answer: one effect", async () => {
      const s = scope();
      provider.next("lose_answer");
      await expect(call(tool(), s, "k", args)).rejects.toBeInstanceOf(OutcomeUnknownError);
      expect((await t.store.get(s, "k"))?.status).toBe("unknown");
      expect(provider.effectsOf(keyAt(s, "k"))).toBe(1);

      const retry = await call(tool(), s, "k", args);
      expect(retry.kind).toBe("executed");
      const sent = provider.received.filter((r) => r.key === keyAt(s, "k"));
      expect(sent).toHaveLength(2);
      expect(JSON.parse(retry.body)).toEqual({ id: `${provider.rules.name}_${provider.effects.findIndex((e) => e.key === keyAt(s, "k")) + 1}`, object: "created" });

      const again = await call(tool(), s, "k", args);
      expect(again.kind).toBe("replayed");
      expect(provider.received.filter((r) => r.key === keyAt(s, "k"))).toHaveLength(2);
      expect(provider.effectsOf(keyAt(s, "k"))).toBe(1);
    });

    it("probe: resend (the reconciler's question) resolves an unknown outcome with the provider's stored answer: one effect", async () => {
      const s = scope();
      provider.next("lose_answer");
      await expect(call(tool(), s, "k", args)).rejects.toBeInstanceOf(OutcomeUnknownError);
      expect(await t.db.prisma.upstreamResend.count({ where: { scope: s, key: "k" } })).toBe(1);

      const out = await probeKey(runtime(), { scope: s, key: "k", actor: "reconciler" });
      expect(out.action).toBe("resolved");
      expect(out.answer).toMatchObject({ outcome: "applied", status: 200, body: { object: "created" } });
      expect(provider.received.filter((r) => r.key === keyAt(s, "k"))).toHaveLength(2);
      expect(await t.db.prisma.upstreamResend.count({ where: { scope: s, key: "k" } })).toBe(0);

      const retry = await call(tool(), s, "k", args);
      expect(retry.kind).toBe("replayed");
      expect(JSON.parse(retry.body)).toEqual(out.answer.outcome === "applied" ? out.answer.body : null);
      expect(provider.effectsOf(keyAt(s, "k"))).toBe(1);
    });

    it("a call answered at once keeps nothing for a resend", async () => {
      const s = scope();
      expect((await call(tool(), s, "k", args)).kind).toBe("executed");
      expect(await t.db.prisma.upstreamResend.count({ where: { scope: s } })).toBe(0);
    });

  });

  // PayPal's refusal while the first is in progress is played as 422 DUPLICATE_REQUEST_ID
  describe.each(cases.filter((c) => c.inProgress))("$preset, while the first request is in progress", ({ preset, tool: toolName, args }) => {
    const provider = providers[preset];
    const tool = () => registry.get(toolName);
    const keyAt = (s: string, key: string) => derivedKey(s, key);

    it("the provider's conflict while the first request is in progress leaves the key unknown; asked later, it resolves: one effect", async () => {
      const s = scope();
      provider.next({ holdMs: 2_500 });
      await expect(call(tool(), s, "k", args)).rejects.toBeInstanceOf(OutcomeUnknownError);

      const early = await probeKey(runtime(), { scope: s, key: "k", actor: "reconciler" });
      expect(early.answer).toMatchObject({ outcome: "unknown", note: expect.stringMatching(/^resent with the same key: the service answered (409|422)/) });
      expect(early.action).toBe("none");
      expect((await t.store.get(s, "k"))?.status).toBe("unknown");

      await vi.waitFor(() => expect(provider.effectsOf(keyAt(s, "k"))).toBe(1), { timeout: 6_000 });
      const later = await probeKey(runtime(), { scope: s, key: "k", actor: "reconciler" });
      expect(later.action).toBe("resolved");
      expect(provider.effectsOf(keyAt(s, "k"))).toBe(1);
    });
  });

  it("a resend answered with a 4xx not marked as the key's stored answer (the URL was edited: 404) leaves the key unknown", async () => {
    const s = scope();
    providers.edited.next("lose_answer");
    await expect(call(registry.get("edited.send_email"), s, "k", { to: "b@example.com" })).rejects.toBeInstanceOf(OutcomeUnknownError);
    const out = await probeKey({ ...runtime(), registry: edited }, { scope: s, key: "k", actor: "reconciler" });
    expect(out.answer).toMatchObject({ outcome: "unknown", note: expect.stringMatching(/answered 404/) });
    expect(out.action).toBe("none");
    expect((await t.store.get(s, "k"))?.status).toBe("unknown");
    expect(providers.edited.effectsOf(derivedKey(s, "k"))).toBe(1);
  });

  it("a 4xx marked Idempotent-Replayed is the key's stored answer: a resend resolves the key with it", async () => {
    const s = scope();
    const calls: number[] = [];
    const fetchImpl = (async () => {
      calls.push(1);
      if (calls.length === 1) throw Object.assign(new Error("socket hang up"), { code: "ECONNRESET" });
      return new Response(JSON.stringify({ error: { type: "card_error" } }), { status: 402, headers: { "content-type": "application/json", "idempotent-replayed": "true" } });
    }) as typeof fetch;
    const own = new ToolRegistry(registry.list(), { fetch: fetchImpl });
    const tool = own.get("stripe.create_payment_intent");
    await expect(t.engine.invoke(tool, own.runnerFor(tool, t.db.prisma), { scope: s, key: "k", args: own.parseArgs(tool, { amount: 1 }) })).rejects.toBeInstanceOf(OutcomeUnknownError);
    const out = await probeKey({ ...runtime(), registry: own }, { scope: s, key: "k", actor: "reconciler" });
    expect(out.action).toBe("resolved");
    expect(out.answer).toMatchObject({ outcome: "applied", status: 402 });
  });

  it("stripe: a retry whose request changed (idempotency_error 400: the key's first request ran) stays unknown, never a final error", async () => {
    const s = scope();
    const args = { amount: 2000, currency: "eur" };
    providers.stripe.next("lose_answer");
    await expect(call(registry.get("stripe.create_payment_intent"), s, "k", args)).rejects.toBeInstanceOf(OutcomeUnknownError);
    const tool = edited.get("stripe.create_payment_intent");
    await expect(t.engine.invoke(tool, edited.runnerFor(tool, t.db.prisma), { scope: s, key: "k", args: edited.parseArgs(tool, args) })).rejects.toBeInstanceOf(OutcomeUnknownError);
    expect(providers.stripe.received.filter((r) => r.key === derivedKey(s, "k")).at(-1)?.url).toMatch(/expand=x/);
    expect((await t.store.get(s, "k"))?.status).toBe("unknown");
    const out = await probeKey({ ...runtime(), registry: edited }, { scope: s, key: "k", actor: "reconciler" });
    expect(out.action).toBe("none");
    expect((await t.store.get(s, "k"))?.status).toBe("unknown");
    expect(providers.stripe.effectsOf(derivedKey(s, "k"))).toBe(1);
  });

  it("the resend window runs from the key's first send: past it, neither a retry nor a probe sends the call again", async () => {
    const s = scope();
    const tool = registry.get("stripe.create_payment_intent");
    const args = { amount: 2000, currency: "eur" };
    providers.stripe.next("lose_answer");
    await expect(call(tool, s, "k", args)).rejects.toBeInstanceOf(OutcomeUnknownError);
    // the first send was 23.5 h ago: Stripe keeps keys 24 h, and a resend stops an hour before
    await t.db.prisma.upstreamResend.updateMany({ where: { scope: s, key: "k" }, data: { sentAt: new Date(Date.now() - 23.5 * 60 * 60 * 1000) } });
    // Stripe may have forgotten the key: a retry is not sent (it could charge again) and the key stays unknown
    providers.stripe.forgetKey(derivedKey(s, "k"));
    const sent = providers.stripe.received.length;
    await expect(call(tool, s, "k", { ...args })).rejects.toBeInstanceOf(OutcomeUnknownError);
    expect(providers.stripe.received.length).toBe(sent);
    expect((await t.store.get(s, "k"))?.status).toBe("unknown");
    expect(providers.stripe.effectsOf(derivedKey(s, "k"))).toBe(1);
    const out = await probeKey(runtime(), { scope: s, key: "k", actor: "reconciler" });
    expect(out.answer).toMatchObject({ outcome: "unknown", note: expect.stringMatching(/first sent more than the service keeps keys/) });
    expect(out.action).toBe("none");

    // keeping an execution again keeps its first sentAt
    const log = prismaResendLog(t.db.prisma);
    const executionId = randomUUID();
    await log.keep({ executionId, scope: s, key: "k2", tool: tool.name, args: {}, sentAtMs: 1_000_000 });
    await log.keep({ executionId, scope: s, key: "k2", tool: tool.name, args: {}, sentAtMs: 2_000_000 });
    expect((await log.find(s, "k2", tool.name, executionId))?.sentAtMs).toBe(1_000_000);
    // a later call of the key (a retry, its own execution) does not restart the window
    const retried = await log.find(s, "k2", tool.name, null);
    await log.keep({ executionId: randomUUID(), scope: s, key: "k2", tool: tool.name, args: { n: 2 }, sentAtMs: 3_000_000 });
    expect(await log.find(s, "k2", tool.name, null)).toEqual({ args: { n: 2 }, sentAtMs: retried!.sentAtMs });
    // another tool's call under the key is not this tool's
    expect(await log.find(s, "k2", "resend.send_email", null)).toBeNull();
  });

  it("an operator's release or resolve of an unknown key deletes the arguments kept for its resend", async () => {
    const tool = registry.get("stripe.create_payment_intent");
    for (const decide of ["release", "resolve"] as const) {
      const s = scope();
      providers.stripe.next("lose_answer");
      await expect(call(tool, s, "k", { amount: 1 })).rejects.toBeInstanceOf(OutcomeUnknownError);
      expect(await t.db.prisma.upstreamResend.count({ where: { scope: s, key: "k" } })).toBe(1);
      if (decide === "release") await releaseKey(runtime(), { scope: s, key: "k", actor: "op", reason: "checked the dashboard: not charged" });
      else await resolveKey(runtime(), { scope: s, key: "k", actor: "op", reason: "checked the dashboard: charged", result: { id: "pi_1" } });
      expect(await t.db.prisma.upstreamResend.count({ where: { scope: s, key: "k" } })).toBe(0);
    }
  });

  it("resend: a retry whose request changed (409 invalid_idempotent_request: the key's first request ran) stays unknown", async () => {
    const s = scope();
    const args = { from: "a@example.com", to: ["b@example.com"], subject: "hi" };
    providers.resend.next("lose_answer");
    await expect(call(registry.get("resend.send_email"), s, "k", args)).rejects.toBeInstanceOf(OutcomeUnknownError);
    const tool = edited.get("resend.send_email");
    await expect(t.engine.invoke(tool, edited.runnerFor(tool, t.db.prisma), { scope: s, key: "k", args: edited.parseArgs(tool, args) })).rejects.toBeInstanceOf(OutcomeUnknownError);
    expect(providers.resend.received.filter((r) => r.key === derivedKey(s, "k")).at(-1)?.url).toBe("/emails/batch");
    expect((await t.store.get(s, "k"))?.status).toBe("unknown");
    expect(providers.resend.effectsOf(derivedKey(s, "k"))).toBe(1);
  });

  it("stripe: the body is a form nested as Stripe reads it", async () => {
    const s = scope();
    const args = { amount: 2000, currency: "eur", metadata: { order: { id: "o/1 & co" } }, payment_method_types: ["card", "sepa_debit"], description: null };
    await call(registry.get("stripe.create_payment_intent"), s, "k", args);
    const [sent] = providers.stripe.received.filter((r) => r.key === derivedKey(s, "k"));
    expect(sent.headers["content-type"]).toBe("application/x-www-form-urlencoded");
    expect(sent.body).toBe("amount=2000&currency=eur&metadata%5Border%5D%5Bid%5D=o%2F1+%26+co&payment_method_types%5B0%5D=card&payment_method_types%5B1%5D=sepa_debit&description=");
    expect(providers.stripe.effects.find((e) => e.key === derivedKey(s, "k"))?.request).toEqual([
      ["amount", "2000"],
      ["currency", "eur"],
      ["metadata[order][id]", "o/1 & co"],
      ["payment_method_types[0]", "card"],
      ["payment_method_types[1]", "sepa_debit"],
      ["description", ""],
    ]);
  });

  it("keyMaxLength: the key a provider taking 32 characters receives fits, and is the same on a retry", async () => {
    const s = scope();
    providers.short.next("lose_answer");
    const tool = registry.get("short.payments");
    await expect(call(tool, s, "k", { reference: "r" })).rejects.toBeInstanceOf(OutcomeUnknownError);
    expect((await call(tool, s, "k", { reference: "r" })).kind).toBe("executed");
    const keys = providers.short.received.map((r) => r.key);
    expect(keys).toEqual([fitKey(derivedKey(s, "k"), 32), fitKey(derivedKey(s, "k"), 32)]);
    expect(keys[0]).toHaveLength(32);
    expect(providers.short.effects).toHaveLength(1);
    // Adyen's own 64: the derived key already fits
    expect(derivedKey(s, "k").length).toBeLessThanOrEqual(64);
  });

  it("paypal: the key travels as PayPal-Request-Id and a path argument is encoded as one segment", async () => {
    const s = scope();
    const tool = registry.get("paypal.capture_order");
    await call(tool, s, "k", { orderId: "ord/1?x=y#z", note_to_payer: "thanks" });
    const [sent] = providers.paypal.received.filter((r) => r.key === derivedKey(s, "k"));
    expect(sent.url).toBe("/v2/checkout/orders/ord%2F1%3Fx%3Dy%23z/capture");
    expect(sent.headers["idempotency-key"]).toBeUndefined();
    expect(JSON.parse(sent.body)).toEqual({ note_to_payer: "thanks" });
  });

  it("a call without its path argument is a 400 before anything is sent or held", async () => {
    const s = scope();
    const tool = registry.get("paypal.capture_order");
    const before = providers.paypal.received.length;
    expect(() => registry.parseArgs(tool, { note_to_payer: "x" })).toThrow(InvalidArgumentsError);
    // an IDEMGATE_UPSTREAM_TOOLS tool has no inputSchema: its URL alone refuses the call
    const [envTool] = upstreamToolsFromEnv(JSON.stringify([{ name: "paypal.capture", preset: "paypal", url: `${providers.paypal.base}/v2/checkout/orders/{orderId}/capture`, timeoutMs: 400 }]));
    expect(() => new ToolRegistry([envTool]).parseArgs(envTool, {})).toThrow(/orderId: is required: the URL's path names it/);
    try {
      registry.parseArgs(tool, { orderId: { nested: true } });
      throw new Error("accepted");
    } catch (err) {
      expect(err).toBeInstanceOf(InvalidArgumentsError);
      expect((err as InvalidArgumentsError).message).toMatch(/orderId/);
    }
    expect(providers.paypal.received.length).toBe(before);
    expect(await t.store.get(s, "k")).toBeNull();
  });
});
