import { z } from "zod";
import { defineTool, type ToolDefinition } from "../define-tool";

/**
 * A tool that runs in its caller's own process: the caller's function (a payment SDK call, a
 * write to its own ledger) is guarded over the reservation API with the client libraries'
 * guard(). Idemgate validates the arguments, holds the key, stores and replays the result and
 * audits every execution, but never runs it. The result is whatever the caller's function returned.
 */
export const record = defineTool({
  name: "ledger.record",
  kind: "write",
  runs: "client",
  description: "Record an entry in the caller's own ledger (runs in the caller's process, guarded over the reservation API).",
  leaseMs: 60_000,
  schema: z.strictObject({
    account: z.string().min(1).max(128).describe("the ledger account the entry is booked to"),
    amountCents: z.number().int("must be a whole number of cents").min(-1_000_000_000).max(1_000_000_000).describe("signed amount in the currency's smallest unit"),
    currency: z.string().regex(/^[A-Z]{3}$/, "must be a 3-letter ISO 4217 code in capitals, e.g. USD"),
    memo: z.string().max(500).optional(),
  }),
});

export const tools: readonly ToolDefinition[] = [record];
