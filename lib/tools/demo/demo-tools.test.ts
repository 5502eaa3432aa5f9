import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { PrismaClient } from "@/generated/prisma/client";
import { AbandonCall, FinalToolError, type ToolResult } from "@/lib/idempotency/tool";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { ToolRegistry } from "../registry";
import { demoTools } from ".";

const registry = new ToolRegistry(demoTools);
let testDb: TestPostgres;
let db: PrismaClient;

let ready: Promise<void>;

beforeAll(() => {
  ready = createTestPostgres("idemgate_test_tools").then((t) => {
    testDb = t;
    db = t.db.prisma;
  });
  ready.catch(() => {});
});

// Awaited per test, so an unreachable PostgreSQL fails every test rather than skipping them.
beforeEach(() => ready);

afterAll(async () => {
  await testDb?.drop();
});

function newScope(): string {
  return `t${randomUUID().slice(0, 8)}`;
}

/** Validates the arguments and runs the tool as the gateway would, under a fresh key unless given one. */
async function call(scope: string, name: string, args: unknown, key: string | null = `k-${randomUUID()}`): Promise<Record<string, any>> {
  const tool = registry.get(name);
  const parsed = registry.parseArgs(tool, args);
  const result: ToolResult = await registry.runnerFor(tool, db)(parsed, {
    scope,
    key: tool.kind === "read" ? null : key,
    session: null,
    executionId: randomUUID(),
  });
  expect(result.status ?? 200).toBe(200);
  return result.body as Record<string, any>;
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to fail");
}

describe("payments.charge", () => {
  it("records exactly one charge per run, under the call's scope and key", async () => {
    const scope = newScope();
    const body = await call(scope, "payments.charge", { customerId: "cus_1", amountCents: 1250, currency: "EUR", description: "tea" }, "key-1");
    expect(body).toEqual({ chargeId: expect.stringMatching(/^ch_[0-9a-f]{24}$/), customerId: "cus_1", amountCents: 1250, currency: "EUR", createdAt: expect.any(String) });
    expect(new Date(body.createdAt).toISOString()).toBe(body.createdAt);

    const rows = await db.demoCharge.findMany({ where: { scope } });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: body.chargeId, idempotencyKey: "key-1", customerId: "cus_1", amountCents: 1250, description: "tea" });

    await call(scope, "payments.charge", { customerId: "cus_1", amountCents: 1, currency: "EUR" }, "key-2");
    expect(await db.demoCharge.count({ where: { scope } })).toBe(2);
  });

  it("decline: a final 402 problem, stored and replayed by the engine, and no charge", async () => {
    const scope = newScope();
    const err = await failure(call(scope, "payments.charge", { customerId: "c", amountCents: 5, currency: "USD", simulate: { outcome: "decline" } }));
    expect(err).toBeInstanceOf(FinalToolError);
    expect((err as FinalToolError).status).toBe(402);
    expect((err as FinalToolError).body).toMatchObject({ code: "card_declined", status: 402, title: "Card declined", type: expect.stringContaining("card-declined") });
    expect(await db.demoCharge.count({ where: { scope } })).toBe(0);
  });

  it("error: a plain error before the side effect (the engine releases the key)", async () => {
    const scope = newScope();
    const err = await failure(call(scope, "payments.charge", { customerId: "c", amountCents: 5, currency: "USD", simulate: { outcome: "error" } }));
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(FinalToolError);
    expect(err).not.toBeInstanceOf(AbandonCall);
    expect(await db.demoCharge.count({ where: { scope } })).toBe(0);
  });

  it("crash_after_effect: the charge is committed, then the call is abandoned", async () => {
    const scope = newScope();
    const err = await failure(call(scope, "payments.charge", { customerId: "c", amountCents: 5, currency: "USD", simulate: { outcome: "crash_after_effect" } }, "crash-key"));
    expect(err).toBeInstanceOf(AbandonCall);
    const rows = await db.demoCharge.findMany({ where: { scope } });
    expect(rows).toHaveLength(1);
    expect(rows[0].idempotencyKey).toBe("crash-key");
  });

  it("latency: waits before the side effect", async () => {
    const scope = newScope();
    const started = performance.now();
    await call(scope, "payments.charge", { customerId: "c", amountCents: 5, currency: "USD", simulate: { latencyMs: 150, outcome: "ok" } });
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    expect(await db.demoCharge.count({ where: { scope } })).toBe(1);
  });
});

describe("payments.refund", () => {
  it("refunds the whole charge by default, once; a second refund is a final 409", async () => {
    const scope = newScope();
    const { chargeId } = await call(scope, "payments.charge", { customerId: "c", amountCents: 700, currency: "USD" });
    const body = await call(scope, "payments.refund", { chargeId }, "refund-1");
    expect(body).toEqual({ refundId: expect.stringMatching(/^re_[0-9a-f]{24}$/), chargeId, amountCents: 700, createdAt: expect.any(String) });
    const rows = await db.demoRefund.findMany({ where: { scope } });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ id: body.refundId, idempotencyKey: "refund-1", amountCents: 700 });

    const again = await failure(call(scope, "payments.refund", { chargeId }));
    expect(again).toBeInstanceOf(FinalToolError);
    expect((again as FinalToolError).status).toBe(409);
    expect((again as FinalToolError).body).toMatchObject({ code: "charge_already_refunded" });
    expect(await db.demoRefund.count({ where: { scope } })).toBe(1);
  });

  it("partial refunds: the default is what is left; asking for more than is left is a final 409", async () => {
    const scope = newScope();
    const { chargeId } = await call(scope, "payments.charge", { customerId: "c", amountCents: 1000, currency: "USD" });
    expect((await call(scope, "payments.refund", { chargeId, amountCents: 300 })).amountCents).toBe(300);
    const tooMuch = await failure(call(scope, "payments.refund", { chargeId, amountCents: 701 }));
    expect((tooMuch as FinalToolError).status).toBe(409);
    expect((tooMuch as FinalToolError).body).toMatchObject({ code: "refund_exceeds_charge" });
    expect((await call(scope, "payments.refund", { chargeId })).amountCents).toBe(700);
    expect(await db.demoRefund.count({ where: { scope } })).toBe(2);
  });

  it("an unknown charge, or another scope's, is a final 404", async () => {
    const scope = newScope();
    const unknown = await failure(call(scope, "payments.refund", { chargeId: "ch_nope" }));
    expect(unknown).toBeInstanceOf(FinalToolError);
    expect((unknown as FinalToolError).status).toBe(404);
    expect((unknown as FinalToolError).body).toMatchObject({ code: "charge_not_found" });

    const { chargeId } = await call(newScope(), "payments.charge", { customerId: "c", amountCents: 10, currency: "USD" });
    const foreign = await failure(call(scope, "payments.refund", { chargeId }));
    expect((foreign as FinalToolError).status).toBe(404);
    expect(await db.demoRefund.count({ where: { chargeId } })).toBe(0);
  });

  it("racing full refunds of one charge under different keys: exactly one succeeds", async () => {
    const scope = newScope();
    const { chargeId } = await call(scope, "payments.charge", { customerId: "c", amountCents: 50, currency: "USD" });
    const results = await Promise.allSettled(Array.from({ length: 4 }, () => call(scope, "payments.refund", { chargeId })));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    for (const r of results) if (r.status === "rejected") expect((r.reason as FinalToolError).status).toBe(409);
    expect(await db.demoRefund.count({ where: { scope } })).toBe(1);
  });

  it("decline / error / crash_after_effect", async () => {
    const scope = newScope();
    const { chargeId } = await call(scope, "payments.charge", { customerId: "c", amountCents: 50, currency: "USD" });
    const declined = await failure(call(scope, "payments.refund", { chargeId, simulate: { outcome: "decline" } }));
    expect((declined as FinalToolError).status).toBe(402);
    const failed = await failure(call(scope, "payments.refund", { chargeId, simulate: { outcome: "error" } }));
    expect(failed).not.toBeInstanceOf(FinalToolError);
    expect(await db.demoRefund.count({ where: { scope } })).toBe(0);
    const crashed = await failure(call(scope, "payments.refund", { chargeId, simulate: { outcome: "crash_after_effect" } }));
    expect(crashed).toBeInstanceOf(AbandonCall);
    expect(await db.demoRefund.count({ where: { scope } })).toBe(1);
  });
});

describe("payments reads", () => {
  it("list_charges and get_balance see the customer's charges and refunds in this scope only", async () => {
    const scope = newScope();
    const a = await call(scope, "payments.charge", { customerId: "alice", amountCents: 1000, currency: "USD" });
    await call(scope, "payments.charge", { customerId: "alice", amountCents: 500, currency: "USD" });
    await call(scope, "payments.charge", { customerId: "bob", amountCents: 99, currency: "USD" });
    await call(newScope(), "payments.charge", { customerId: "alice", amountCents: 12345, currency: "USD" });
    await call(scope, "payments.refund", { chargeId: a.chargeId, amountCents: 200 });

    const { charges } = await call(scope, "payments.list_charges", { customerId: "alice" });
    expect(charges).toHaveLength(2);
    expect(charges.map((c: { amountCents: number }) => c.amountCents).sort()).toEqual([1000, 500].sort());
    expect(charges.find((c: { chargeId: string }) => c.chargeId === a.chargeId)).toMatchObject({ refundedCents: 200, currency: "USD" });

    expect(await call(scope, "payments.get_balance", { customerId: "alice" })).toEqual({ balanceCents: 1300 });
    expect(await call(scope, "payments.get_balance", { customerId: "bob" })).toEqual({ balanceCents: 99 });
    expect(await call(scope, "payments.get_balance", { customerId: "nobody" })).toEqual({ balanceCents: 0 });
  });
});

describe("email", () => {
  it("send records one message per run; list_outbox filters by recipient", async () => {
    const scope = newScope();
    const sent = await call(scope, "email.send", { to: "a@example.com", subject: "Hi", body: "hello" }, "mail-1");
    expect(sent).toEqual({ messageId: expect.stringMatching(/^msg_[0-9a-f]{24}$/), createdAt: expect.any(String) });
    await call(scope, "email.send", { to: "b@example.com", subject: "Yo", body: "" });
    const rows = await db.demoEmail.findMany({ where: { scope }, orderBy: { createdAt: "asc" } });
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({ id: sent.messageId, idempotencyKey: "mail-1", to: "a@example.com" });

    expect((await call(scope, "email.list_outbox", {})).messages).toHaveLength(2);
    const { messages } = await call(scope, "email.list_outbox", { to: "a@example.com" });
    expect(messages).toEqual([{ messageId: sent.messageId, to: "a@example.com", subject: "Hi", body: "hello", createdAt: sent.createdAt }]);
    expect((await call(newScope(), "email.list_outbox", undefined)).messages).toEqual([]);
  });

  it("decline / error / crash_after_effect", async () => {
    const scope = newScope();
    const args = { to: "a@example.com", subject: "s", body: "b" };
    expect(((await failure(call(scope, "email.send", { ...args, simulate: { outcome: "decline" } }))) as FinalToolError).status).toBe(402);
    expect(await failure(call(scope, "email.send", { ...args, simulate: { outcome: "error" } }))).not.toBeInstanceOf(FinalToolError);
    expect(await db.demoEmail.count({ where: { scope } })).toBe(0);
    expect(await failure(call(scope, "email.send", { ...args, simulate: { outcome: "crash_after_effect" } }))).toBeInstanceOf(AbandonCall);
    expect(await db.demoEmail.count({ where: { scope } })).toBe(1);
  });

  it("is blocked, not taken over, when stuck", () => {
    expect(registry.get("email.send").stuckPolicy).toBe("block");
  });
});

describe("tickets", () => {
  it("create records one ticket per run (a fallback key too); list shows this scope's", async () => {
    const scope = newScope();
    const t1 = await call(scope, "tickets.create", { title: "Printer on fire" }, "fallback:abc");
    expect(t1).toEqual({ ticketId: expect.stringMatching(/^tkt_[0-9a-f]{24}$/), createdAt: expect.any(String) });
    await call(scope, "tickets.create", { title: "Second", body: "details" });
    await call(newScope(), "tickets.create", { title: "elsewhere" });
    expect(await db.demoTicket.findFirst({ where: { id: t1.ticketId } })).toMatchObject({ scope, idempotencyKey: "fallback:abc", body: null });

    const { tickets } = await call(scope, "tickets.list", {});
    expect(tickets.map((t: { title: string }) => t.title).sort()).toEqual(["Printer on fire", "Second"]);
  });

  it("opted into fallback dedupe with the default 60 s window", () => {
    expect(registry.get("tickets.create").fallbackTtlMs).toBe(60_000);
  });

  it("decline / error / crash_after_effect", async () => {
    const scope = newScope();
    expect(((await failure(call(scope, "tickets.create", { title: "x", simulate: { outcome: "decline" } }))) as FinalToolError).status).toBe(402);
    expect(await failure(call(scope, "tickets.create", { title: "x", simulate: { outcome: "error" } }))).not.toBeInstanceOf(FinalToolError);
    expect(await db.demoTicket.count({ where: { scope } })).toBe(0);
    expect(await failure(call(scope, "tickets.create", { title: "x", simulate: { outcome: "crash_after_effect" } }))).toBeInstanceOf(AbandonCall);
    expect(await db.demoTicket.count({ where: { scope } })).toBe(1);
  });
});

describe("simulate knobs are validated", () => {
  it("refuses out-of-range latency and unknown outcomes", () => {
    const tool = registry.get("tickets.create");
    expect(() => registry.parseArgs(tool, { title: "x", simulate: { latencyMs: 60_001 } })).toThrow(/simulate\.latencyMs/);
    expect(() => registry.parseArgs(tool, { title: "x", simulate: { outcome: "explode" } })).toThrow(/simulate\.outcome/);
  });
});

const listDemoEffects = (prisma: PrismaClient, since: Date) => registry.listEffects(prisma, since);

describe("status probes", () => {
  const probe = (name: string, scope: string, key: string) => registry.proberFor(registry.get(name), db)!({ scope, key, executionId: null });

  it("every demo write tool Idemgate runs can be asked, and no read tool (nor one run by its caller)", () => {
    for (const tool of registry.list()) expect(registry.proberFor(tool, db) !== null).toBe(tool.kind === "write" && tool.runs !== "client");
  });

  it("answers applied with the result the call returned, from the tool's own table, and not_applied otherwise", async () => {
    const scope = newScope();
    const charge = await call(scope, "payments.charge", { customerId: "c", amountCents: 10, currency: "USD" }, "probe-charge");
    expect(await probe("payments.charge", scope, "probe-charge")).toEqual({ outcome: "applied", status: 200, body: charge });
    expect(await probe("payments.charge", scope, "never-sent")).toEqual({ outcome: "not_applied" });
    expect(await probe("payments.charge", newScope(), "probe-charge")).toEqual({ outcome: "not_applied" });

    const thrown = await failure(call(scope, "email.send", { to: "x@example.com", subject: "s", body: "b", simulate: { outcome: "throw_after_effect" } }, "probe-mail"));
    expect((thrown as Error).message).toMatch(/after the side effect/);
    expect(await probe("email.send", scope, "probe-mail")).toMatchObject({ outcome: "applied", body: { messageId: expect.stringMatching(/^msg_/) } });
    await failure(call(scope, "tickets.create", { title: "t", simulate: { outcome: "error" } }, "probe-ticket"));
    expect(await probe("tickets.create", scope, "probe-ticket")).toEqual({ outcome: "not_applied" });
  });
});

describe("reconcile hook", () => {
  it("lists every committed side effect since a time with its tool, scope and key", async () => {
    const since = new Date(Date.now() - 1);
    const scope = newScope();
    const charge = await call(scope, "payments.charge", { customerId: "c", amountCents: 10, currency: "USD" }, "eff-charge");
    const refund = await call(scope, "payments.refund", { chargeId: charge.chargeId }, "eff-refund");
    const mail = await call(scope, "email.send", { to: "x@example.com", subject: "s", body: "b" }, "eff-mail");
    await failure(call(scope, "tickets.create", { title: "t", simulate: { outcome: "crash_after_effect" } }, "eff-ticket"));
    await failure(call(scope, "tickets.create", { title: "t", simulate: { outcome: "error" } }, "eff-none"));

    const effects = (await listDemoEffects(db, since)).filter((e) => e.scope === scope);
    expect(effects.map((e) => [e.tool, e.key])).toEqual([
      ["payments.charge", "eff-charge"],
      ["payments.refund", "eff-refund"],
      ["email.send", "eff-mail"],
      ["tickets.create", "eff-ticket"],
    ]);
    expect(effects[0].effectId).toBe(charge.chargeId);
    expect(effects[1].effectId).toBe(refund.refundId);
    expect(effects[2].effectId).toBe(mail.messageId);
    expect(effects.every((e) => e.createdAt >= since)).toBe(true);

    expect((await listDemoEffects(db, new Date(Date.now() + 60_000))).filter((e) => e.scope === scope)).toEqual([]);
  });
});
