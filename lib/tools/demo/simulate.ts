import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { AbandonCall, FinalToolError, NotRunError, type ProbeAnswer, type ToolContext } from "@/lib/idempotency/tool";

/** Knobs every demo write tool accepts, so retries, slowness and crashes can be produced on purpose. */
export const simulateSchema = z
  .strictObject({
    latencyMs: z.number().int().min(0).max(60_000).optional().describe("wait this long before the side effect"),
    afterEffectMs: z
      .number()
      .int()
      .min(0)
      .max(60_000)
      .optional()
      .describe("wait this long after the side effect is committed, before answering: a process killed meanwhile leaves it without a done record"),
    outcome: z
      .enum(["ok", "decline", "error", "throw_after_effect", "crash_after_effect"])
      .optional()
      .describe(
        "ok (default); decline: a final error, stored and replayed (402); error: fails before the side effect and says so, the key is released (502); " +
          "throw_after_effect: the side effect is committed, then the tool throws: the outcome is unknown, the key is held (502); " +
          "crash_after_effect: the side effect is committed, then the call is abandoned as by a crashed process (500, the key stays inflight)",
      ),
  })
  .optional()
  .describe("simulation knobs for demos and fault tests");

export type Simulate = z.output<typeof simulateSchema>;

/** RFC 9457 problem type of a demo tool's final errors. */
export function demoProblem(code: string, status: number, title: string, detail: string) {
  return { type: `https://idemgate.dev/problems/demo/${code.replaceAll("_", "-")}`, title, status, detail, code };
}

export interface Decline {
  code: string;
  title: string;
  detail: string;
}

/** Runs before the side effect: the latency, then a simulated decline or failure. */
export async function beforeEffect(simulate: Simulate, ctx: ToolContext, decline: Decline): Promise<void> {
  if (simulate?.latencyMs) await sleep(simulate.latencyMs, undefined, { signal: ctx.signal });
  switch (simulate?.outcome) {
    case "decline":
      throw new FinalToolError(402, demoProblem(decline.code, 402, decline.title, decline.detail));
    case "error":
      throw new NotRunError("simulated failure before the side effect (simulate.outcome = error)");
  }
}

/** Runs once the side effect is committed: the pause after it, then a simulated crash abandons the call. */
export async function afterEffect(simulate: Simulate, ctx: ToolContext): Promise<void> {
  if (simulate?.afterEffectMs) await sleep(simulate.afterEffectMs, undefined, { signal: ctx.signal });
  if (simulate?.outcome === "crash_after_effect") throw new AbandonCall();
  if (simulate?.outcome === "throw_after_effect") throw new Error("simulated exception after the side effect (simulate.outcome = throw_after_effect)");
}

/**
 * A demo tool's status probe: the row its call with this key committed (applied, with the result
 * the call returned), or none (not applied). The demo tables keep each effect's key.
 */
export async function probeByKey<Row>(find: () => Promise<Row | null>, present: (row: Row) => unknown): Promise<ProbeAnswer> {
  const row = await find();
  return row === null ? { outcome: "not_applied" } : { outcome: "applied", status: 200, body: present(row) };
}

/** Stripe-like ids: a prefix naming the kind of object and 96 random bits. */
export function newId(prefix: "ch" | "re" | "msg" | "tkt"): string {
  return `${prefix}_${randomBytes(12).toString("hex")}`;
}

/** Demo lists show the most recent rows only; the tables grow without bound under `simulate`. */
export const LIST_LIMIT = 100;
