import { z } from "zod";
import { FinalToolError } from "@/lib/idempotency/tool";
import { defineTool, type ToolDefinition } from "../define-tool";
import { LIST_LIMIT, afterEffect, beforeEffect, demoProblem, newId, probeByKey, simulateSchema } from "./simulate";

const customerId = z.string().min(1).max(128).describe("the customer's id in your system");
// Amounts stay well inside the int4 columns, so a large one is a 400, not a database error.
const amountCents = z.number().int("must be a whole number of cents").positive("must be more than 0").max(1_000_000_000);
const isoDate = z.iso.datetime();

export const charge = defineTool({
  name: "payments.charge",
  kind: "write",
  description: "Charge a customer (demo payment provider). Each run records one charge.",
  leaseMs: 60_000,
  schema: z.strictObject({
    customerId,
    amountCents: amountCents.describe("amount in the currency's smallest unit"),
    currency: z.string().regex(/^[A-Z]{3}$/, "must be a 3-letter ISO 4217 code in capitals, e.g. USD"),
    description: z.string().max(500).optional(),
    simulate: simulateSchema,
  }),
  resultSchema: z.object({ chargeId: z.string(), customerId: z.string(), amountCents: z.number().int(), currency: z.string(), createdAt: isoDate }),
  async run(args, ctx) {
    await beforeEffect(args.simulate, ctx, {
      code: "card_declined",
      title: "Card declined",
      detail: `the card of customer ${args.customerId} was declined (simulated)`,
    });
    const row = await ctx.db.demoCharge.create({
      data: {
        id: newId("ch"),
        scope: ctx.scope,
        customerId: args.customerId,
        amountCents: args.amountCents,
        currency: args.currency,
        description: args.description ?? null,
        idempotencyKey: ctx.key,
        createdAt: new Date(),
      },
    });
    await afterEffect(args.simulate, ctx);
    return { body: presentCharge(row) };
  },
  probe: (ctx) =>
    probeByKey(() => ctx.db.demoCharge.findFirst({ where: { scope: ctx.scope, idempotencyKey: ctx.key }, orderBy: { createdAt: "desc" } }), presentCharge),
  listEffects: async (db, since) => {
    const rows = await db.demoCharge.findMany({ where: { createdAt: { gte: since } }, select: { id: true, scope: true, idempotencyKey: true, createdAt: true } });
    return rows.map((r) => ({ tool: "payments.charge", scope: r.scope, key: r.idempotencyKey, effectId: r.id, createdAt: r.createdAt }));
  },
});

function presentCharge(row: { id: string; customerId: string; amountCents: number; currency: string; createdAt: Date }) {
  return { chargeId: row.id, customerId: row.customerId, amountCents: row.amountCents, currency: row.currency, createdAt: row.createdAt.toISOString() };
}

function presentRefund(row: { id: string; chargeId: string; amountCents: number; createdAt: Date }) {
  return { refundId: row.id, chargeId: row.chargeId, amountCents: row.amountCents, createdAt: row.createdAt.toISOString() };
}

export const refund = defineTool({
  name: "payments.refund",
  kind: "write",
  description: "Refund a charge, by default its whole remaining amount. Refused (stored and replayed) when the charge is unknown or already refunded.",
  schema: z.strictObject({
    chargeId: z.string().min(1).max(64),
    amountCents: amountCents.optional().describe("defaults to what is left of the charge"),
    simulate: simulateSchema,
  }),
  resultSchema: z.object({ refundId: z.string(), chargeId: z.string(), amountCents: z.number().int(), createdAt: isoDate }),
  async run(args, ctx) {
    await beforeEffect(args.simulate, ctx, {
      code: "refund_declined",
      title: "Refund declined",
      detail: `the refund of ${args.chargeId} was declined (simulated)`,
    });
    const row = await ctx.db.$transaction(async (tx) => {
      // Refunds of one charge queue behind each other, so two of them cannot both pass the check.
      const found = await tx.$queryRaw<{ amount_cents: number }[]>`
        SELECT amount_cents FROM demo_charges WHERE id = ${args.chargeId} AND scope = ${ctx.scope} FOR UPDATE`;
      if (found.length === 0) {
        throw new FinalToolError(404, demoProblem("charge_not_found", 404, "Charge not found", `there is no charge ${args.chargeId}`));
      }
      const refunded = await tx.demoRefund.aggregate({ where: { scope: ctx.scope, chargeId: args.chargeId }, _sum: { amountCents: true } });
      const remaining = found[0].amount_cents - (refunded._sum.amountCents ?? 0);
      if (remaining <= 0) {
        throw new FinalToolError(409, demoProblem("charge_already_refunded", 409, "Charge already refunded", `${args.chargeId} is fully refunded`));
      }
      const amount = args.amountCents ?? remaining;
      if (amount > remaining) {
        throw new FinalToolError(
          409,
          demoProblem("refund_exceeds_charge", 409, "Refund exceeds charge", `only ${remaining} cents of ${args.chargeId} are left to refund; asked for ${amount}`),
        );
      }
      return tx.demoRefund.create({
        data: { id: newId("re"), scope: ctx.scope, chargeId: args.chargeId, amountCents: amount, idempotencyKey: ctx.key, createdAt: new Date() },
      });
    });
    await afterEffect(args.simulate, ctx);
    return { body: presentRefund(row) };
  },
  probe: (ctx) =>
    probeByKey(() => ctx.db.demoRefund.findFirst({ where: { scope: ctx.scope, idempotencyKey: ctx.key }, orderBy: { createdAt: "desc" } }), presentRefund),
  listEffects: async (db, since) => {
    const rows = await db.demoRefund.findMany({ where: { createdAt: { gte: since } }, select: { id: true, scope: true, idempotencyKey: true, createdAt: true } });
    return rows.map((r) => ({ tool: "payments.refund", scope: r.scope, key: r.idempotencyKey, effectId: r.id, createdAt: r.createdAt }));
  },
});

export const listCharges = defineTool({
  name: "payments.list_charges",
  kind: "read",
  description: `A customer's charges, newest first (the ${LIST_LIMIT} most recent), with what was refunded of each.`,
  schema: z.strictObject({ customerId }),
  resultSchema: z.object({
    charges: z.array(
      z.object({
        chargeId: z.string(),
        customerId: z.string(),
        amountCents: z.number().int(),
        refundedCents: z.number().int(),
        currency: z.string(),
        description: z.string().nullable(),
        createdAt: isoDate,
      }),
    ),
  }),
  async run(args, ctx) {
    const rows = await ctx.db.demoCharge.findMany({
      where: { scope: ctx.scope, customerId: args.customerId },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      take: LIST_LIMIT,
    });
    const refunds = await ctx.db.demoRefund.groupBy({
      by: ["chargeId"],
      where: { scope: ctx.scope, chargeId: { in: rows.map((r) => r.id) } },
      _sum: { amountCents: true },
    });
    const refundedOf = new Map(refunds.map((r) => [r.chargeId, r._sum.amountCents ?? 0]));
    return {
      body: {
        charges: rows.map((r) => ({
          chargeId: r.id,
          customerId: r.customerId,
          amountCents: r.amountCents,
          refundedCents: refundedOf.get(r.id) ?? 0,
          currency: r.currency,
          description: r.description,
          createdAt: r.createdAt.toISOString(),
        })),
      },
    };
  },
});

export const getBalance = defineTool({
  name: "payments.get_balance",
  kind: "read",
  description: "What a customer was charged minus what was refunded, in cents (all currencies added up: it is a demo).",
  schema: z.strictObject({ customerId }),
  resultSchema: z.object({ balanceCents: z.number().int() }),
  async run(args, ctx) {
    const charged = await ctx.db.demoCharge.aggregate({ where: { scope: ctx.scope, customerId: args.customerId }, _sum: { amountCents: true } });
    const [refunded] = await ctx.db.$queryRaw<{ total: bigint | null }[]>`
      SELECT SUM(r.amount_cents) AS total
      FROM demo_refunds r JOIN demo_charges c ON c.id = r.charge_id AND c.scope = r.scope
      WHERE c.scope = ${ctx.scope} AND c.customer_id = ${args.customerId}`;
    return { body: { balanceCents: (charged._sum.amountCents ?? 0) - Number(refunded?.total ?? 0) } };
  },
});

export const tools: readonly ToolDefinition[] = [charge, refund, listCharges, getBalance];
