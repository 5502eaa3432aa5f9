// One process calling a guarded function over the reservation API, for the multi-process fault
// tests (test/faults/client-processes.test.ts). Environment as test/support/guard_worker.py's; prints
// one JSON line. It speaks the protocol itself (reserve with Prefer: wait, run, complete or release),
// as the TypeScript client's guard() does.
import { openSync, writeSync, closeSync, constants } from "node:fs";

const env = (name: string) => process.env[name] ?? "";
const url = env("IDEMGATE_URL");
const headers = { authorization: `Bearer ${env("IDEMGATE_TOKEN")}`, "content-type": "application/json" };
const mode = env("MODE") || "ok";
let ran = false;

class NotAppliedError extends Error {}

async function post(path: string, body: unknown, extra: Record<string, string> = {}) {
  const res = await fetch(url + path, { method: "POST", headers: { ...headers, ...extra }, body: JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

async function effect(): Promise<unknown> {
  if (mode === "not_applied") throw new NotAppliedError("the service refused the connection: nothing happened");
  ran = true;
  const fd = openSync(env("LEDGER"), constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, 0o644);
  writeSync(fd, JSON.stringify({ lang: "ts", pid: process.pid }) + "\n");
  closeSync(fd);
  await new Promise((r) => setTimeout(r, Number(env("DELAY_MS") || 0)));
  if (mode === "crash") process.kill(process.pid, "SIGKILL");
  if (mode === "throw") throw new Error("the answer was lost after the effect");
  return { by: "ts", pid: process.pid };
}

async function guard(): Promise<Record<string, unknown>> {
  const args = { account: env("ACCOUNT"), amountCents: 100, currency: "EUR" };
  for (let attempt = 1; attempt <= 10; attempt++) {
    const res = await post(`/api/v1/tools/ledger.record/reservations`, { arguments: args }, { "idempotency-key": env("KEY"), prefer: "wait=20" });
    if (res.status === 409 && res.body.type === "/problems/conflict") continue;
    if (res.status === 200) return { outcome: "replayed", body: res.body.body };
    if (res.status !== 201) {
      const name = res.body.type === "/problems/outcome_unknown" ? "OutcomeUnknownError" : "IdemgateApiError";
      return { outcome: name, status: res.status, type: res.body.type };
    }
    const execution = `/api/v1/executions/${encodeURIComponent(String(res.body.executionId))}`;
    const token = res.body.token;
    let result: unknown;
    try {
      result = await effect();
    } catch (err) {
      const notRun = err instanceof NotAppliedError;
      await post(`${execution}/release`, { token, outcome: notRun ? "not_run" : "unknown", note: String(err) });
      return { outcome: notRun ? "NotAppliedError" : "OutcomeUnknownError" };
    }
    await post(`${execution}/complete`, { token, status: 200, body: result });
    return { outcome: "ran", body: result };
  }
  return { outcome: "IdemgateApiError", type: "/problems/conflict", status: 409 };
}

const result = await guard();
console.log(JSON.stringify({ lang: "ts", ran, ...result }));
