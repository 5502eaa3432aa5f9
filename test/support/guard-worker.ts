// One process calling a guarded function through lib/client's guard(), for the multi-process fault
// tests (test/faults/client-processes.test.ts, test/faults/guard.test.ts). Environment as
// test/support/guard_worker.py's; prints one JSON line as soon as guard() returned or threw: whether
// the function ran here, and what guard() returned or threw (the process may then still deliver a
// completion the gateway could not take yet before it exits).
import { closeSync, constants, openSync, writeSync } from "node:fs";
import { IdemgateApiError, IdemgateClient, NotAppliedError, type GuardWarning } from "../../lib/client";

const env = (name: string) => process.env[name] ?? "";
const mode = env("MODE") || "ok";
let ran = false;
const warnings: string[] = [];

async function effect(): Promise<unknown> {
  if (mode === "not_applied") throw new NotAppliedError("the service refused the connection: nothing happened");
  // killed after the reservation, before the effect: the key is held (stuck) though nothing happened
  if (mode === "crash_before") process.kill(process.pid, "SIGKILL");
  ran = true;
  const fd = openSync(env("LEDGER"), constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, 0o644);
  writeSync(fd, JSON.stringify({ lang: "ts", pid: process.pid }) + "\n");
  closeSync(fd);
  await new Promise((r) => setTimeout(r, Number(env("DELAY_MS") || 0)));
  if (mode === "crash") process.kill(process.pid, "SIGKILL");
  if (mode === "throw") throw new Error("the answer was lost after the effect");
  return { by: "ts", pid: process.pid };
}

async function main(): Promise<Record<string, unknown>> {
  // a conflict (another process holds the key) is waited out with Prefer: wait and retried by the client
  // MAX_ATTEMPTS: requests per API call (default 10); FLUSH_ON_EXIT_MS: how long a normal exit waits
  // for a completion not delivered yet (the client's default unless given)
  const client = new IdemgateClient({
    baseUrl: env("IDEMGATE_URL"),
    token: env("IDEMGATE_TOKEN"),
    waitSeconds: 20,
    retry: { maxAttempts: Number(env("MAX_ATTEMPTS") || 10) },
    ...(env("FLUSH_ON_EXIT_MS") ? { flushOnExitMs: Number(env("FLUSH_ON_EXIT_MS")) } : {}),
  });
  const args = { account: env("ACCOUNT"), amountCents: 100, currency: "EUR" };
  try {
    const onWarning = (w: GuardWarning) => {
      warnings.push(w.kind);
      console.warn(`guard-worker: ${w.kind}: ${w.message}`);
    };
    const body = await client.guard("ledger.record", args, effect, { key: env("KEY"), onWarning });
    return { outcome: ran ? "ran" : "replayed", body };
  } catch (err) {
    if (err instanceof NotAppliedError) return { outcome: "NotAppliedError" };
    if (err instanceof IdemgateApiError) return { outcome: err.name, status: err.status, type: err.type };
    throw err;
  }
}

const result = await main();
console.log(JSON.stringify({ lang: "ts", ran, ...result, warnings }));
