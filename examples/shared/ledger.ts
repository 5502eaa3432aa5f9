// The local tool of the three framework examples: a function in the agent's own process that stands
// in for a payment SDK call. It appends one line to a ledger file (the side effect, counted where it
// happens) and is declared to Idemgate as the client-run tool `ledger.record` (a demo tool): Idemgate
// holds its key and stores its result, guard() runs it at most once per key.
import { randomUUID } from "node:crypto";
import { appendFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

/** The arguments of `ledger.record`, as its schema on the gateway declares them. */
export interface LedgerArgs {
  account: string;
  amountCents: number;
  currency: string;
  memo?: string;
}

export interface LedgerEntry extends LedgerArgs {
  entryId: string;
}

/** EXAMPLE_LEDGER_FILE, or a file in the temporary directory. */
export function ledgerFile(): string {
  return process.env.EXAMPLE_LEDGER_FILE ?? path.join(os.tmpdir(), "idemgate-example-ledger.jsonl");
}

/** Books one entry: one JSON line appended to the ledger file (one write, so lines never interleave). */
export async function recordInLedger(args: LedgerArgs): Promise<LedgerEntry> {
  const entry: LedgerEntry = { entryId: `ent_${randomUUID().slice(0, 12)}`, ...args };
  await appendFile(ledgerFile(), `${JSON.stringify(entry)}\n`, { flag: "a" });
  return entry;
}

/** The functions of the client-run tools the examples use, by tool name. */
export const localFunctions: Record<string, (args: never) => Promise<unknown>> = {
  "ledger.record": recordInLedger,
};
