// The tools built into Idemgate. A deployment declares its own without editing this file, in a
// configuration file (IDEMGATE_CONFIG, or idemgate.config.yaml for `npm start`; see
// lib/tools/config-file.ts) or in IDEMGATE_UPSTREAM_TOOLS; a tool that runs in Idemgate's own
// process is declared here.
//
// A tool forwarded to your service (Idemgate passes a key derived from the caller's on, so the
// service can deduplicate too). Its answer decides the outcome: 2xx and 4xx (but 408/425/429) are
// stored and replayed; 408/425/429, `Idemgate-Outcome: not-applied` or a connection refused before
// the request was sent release the key (nothing happened, a retry runs); a timeout, a 5xx, a
// redirect or a reset after sending leave the outcome unknown: the key is held, never run again by
// itself, until the tool's status probe or an operator decides:
//
//   import { z } from "zod";
//   import { defineTool } from "./define-tool";
//
//   const createInvoice = defineTool({
//     name: "billing.create_invoice",
//     kind: "write",
//     description: "Create an invoice in the billing service",
//     schema: z.strictObject({ customerId: z.string(), amountCents: z.number().int().positive() }),
//     upstream: {
//       url: "https://billing.internal/invoices",
//       timeoutMs: 10_000,
//       headers: { authorization: `Bearer ${process.env.BILLING_TOKEN}` },
//     },
//     ttlMs: 24 * 60 * 60 * 1000, // how long a result is replayed (default 24 h)
//     leaseMs: 30_000, // how long a running call is trusted before it counts as stuck (default 60 s)
//     stuckPolicy: "block", // an operator decides about stuck calls; "takeover" runs them again
//     // fallbackDedupe: true, // accept keyless calls, deduplicated by their arguments for 60 s
//   });
//
// An in-process tool gives `run(args, ctx)` instead of `upstream`; ctx has scope, key, session
// and the Prisma client as `db`.
import { demoToolsEnabled } from "./demo-switch";
import { defineTools } from "./define-tool";
import { demoTools } from "./demo";
import { upstreamToolsFromEnv } from "./upstream-from-env";

export default defineTools([
  // the built-in demo tools: on for the embedded default, off when DATABASE_URL is set, unless
  // IDEMGATE_DEMO_TOOLS says otherwise (1 on, 0 off)
  ...(demoToolsEnabled() ? demoTools : []),
  // upstream tools declared in IDEMGATE_UPSTREAM_TOOLS (JSON), see upstream-from-env.ts
  ...upstreamToolsFromEnv(),
  // createInvoice,
]);
