import { z } from "zod";
import { defineTool, type ToolDefinition } from "../define-tool";
import { LIST_LIMIT, afterEffect, beforeEffect, newId, probeByKey, simulateSchema } from "./simulate";

const address = z.email("must be an email address").max(320);
const isoDate = z.iso.datetime();

export const send = defineTool({
  name: "email.send",
  kind: "write",
  description: "Send an email (to the demo outbox). Each run records one message.",
  // A message may or may not have left when its sender crashed: an operator decides, never a retry.
  stuckPolicy: "block",
  schema: z.strictObject({
    to: address,
    subject: z.string().min(1).max(998),
    body: z.string().max(100_000),
    simulate: simulateSchema,
  }),
  resultSchema: z.object({ messageId: z.string(), createdAt: isoDate }),
  async run(args, ctx) {
    await beforeEffect(args.simulate, ctx, {
      code: "message_rejected",
      title: "Message rejected",
      detail: `the mail server refused the message to ${args.to} (simulated)`,
    });
    const row = await ctx.db.demoEmail.create({
      data: { id: newId("msg"), scope: ctx.scope, to: args.to, subject: args.subject, body: args.body, idempotencyKey: ctx.key, createdAt: new Date() },
    });
    await afterEffect(args.simulate, ctx);
    return { body: presentMessage(row) };
  },
  probe: (ctx) =>
    probeByKey(() => ctx.db.demoEmail.findFirst({ where: { scope: ctx.scope, idempotencyKey: ctx.key }, orderBy: { createdAt: "desc" } }), presentMessage),
  listEffects: async (db, since) => {
    const rows = await db.demoEmail.findMany({
      where: { createdAt: { gte: since } },
      select: { id: true, scope: true, idempotencyKey: true, createdAt: true },
      orderBy: { createdAt: "asc" },
    });
    return rows.map((r) => ({ tool: "email.send", scope: r.scope, key: r.idempotencyKey, effectId: r.id, createdAt: r.createdAt }));
  },
});

function presentMessage(row: { id: string; createdAt: Date }) {
  return { messageId: row.id, createdAt: row.createdAt.toISOString() };
}

export const listOutbox = defineTool({
  name: "email.list_outbox",
  kind: "read",
  description: `Sent messages, newest first (the ${LIST_LIMIT} most recent), optionally to one recipient.`,
  schema: z.strictObject({ to: address.optional() }),
  resultSchema: z.object({
    messages: z.array(z.object({ messageId: z.string(), to: z.string(), subject: z.string(), body: z.string(), createdAt: isoDate })),
  }),
  async run(args, ctx) {
    const rows = await ctx.db.demoEmail.findMany({
      where: { scope: ctx.scope, ...(args.to ? { to: args.to } : {}) },
      orderBy: [{ createdAt: "desc" }, { id: "desc" }],
      take: LIST_LIMIT,
    });
    return {
      body: { messages: rows.map((r) => ({ messageId: r.id, to: r.to, subject: r.subject, body: r.body, createdAt: r.createdAt.toISOString() })) },
    };
  },
});

export const tools: readonly ToolDefinition[] = [send, listOutbox];
