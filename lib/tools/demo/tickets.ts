import { z } from "zod";
import { defineTool, type ToolDefinition } from "../define-tool";
import { LIST_LIMIT, afterEffect, beforeEffect, newId, probeByKey, simulateSchema } from "./simulate";

const isoDate = z.iso.datetime();

export const create = defineTool({
  name: "tickets.create",
  kind: "write",
  description: "Open a support ticket. Works without an Idempotency-Key: identical keyless calls within 60 s are deduplicated by their arguments.",
  // The demo of fallback dedupe: identical keyless retries within the window get the first ticket.
  fallbackDedupe: true,
  schema: z.strictObject({
    title: z.string().min(1).max(200),
    body: z.string().max(20_000).optional(),
    simulate: simulateSchema,
  }),
  resultSchema: z.object({ ticketId: z.string(), createdAt: isoDate }),
  async run(args, ctx) {
    await beforeEffect(args.simulate, ctx, {
      code: "ticket_rejected",
      title: "Ticket rejected",
      detail: "the helpdesk refused the ticket (simulated)",
    });
    const row = await ctx.db.demoTicket.create({
      data: { id: newId("tkt"), scope: ctx.scope, title: args.title, body: args.body ?? null, idempotencyKey: ctx.key, createdAt: new Date() },
    });
    await afterEffect(args.simulate, ctx);
    return { body: presentTicket(row) };
  },
  probe: (ctx) =>
    probeByKey(() => ctx.db.demoTicket.findFirst({ where: { scope: ctx.scope, idempotencyKey: ctx.key }, orderBy: { createdAt: "desc" } }), presentTicket),
  listEffects: async (db, since) => {
    const rows = await db.demoTicket.findMany({
      where: { createdAt: { gte: since } },
      select: { id: true, scope: true, idempotencyKey: true, createdAt: true },
      orderBy: { createdAt: "asc" },
    });
    return rows.map((r) => ({ tool: "tickets.create", scope: r.scope, key: r.idempotencyKey, effectId: r.id, createdAt: r.createdAt }));
  },
});

function presentTicket(row: { id: string; createdAt: Date }) {
  return { ticketId: row.id, createdAt: row.createdAt.toISOString() };
}

export const list = defineTool({
  name: "tickets.list",
  kind: "read",
  description: `Open tickets, newest first (the ${LIST_LIMIT} most recent).`,
  schema: z.strictObject({}),
  resultSchema: z.object({
    tickets: z.array(z.object({ ticketId: z.string(), title: z.string(), body: z.string().nullable(), createdAt: isoDate })),
  }),
  async run(_args, ctx) {
    const rows = await ctx.db.demoTicket.findMany({ where: { scope: ctx.scope }, orderBy: [{ createdAt: "desc" }, { id: "desc" }], take: LIST_LIMIT });
    return { body: { tickets: rows.map((r) => ({ ticketId: r.id, title: r.title, body: r.body, createdAt: r.createdAt.toISOString() })) } };
  },
});

export const tools: readonly ToolDefinition[] = [create, list];
