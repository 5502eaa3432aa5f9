// Keys from the run: one Idempotency-Key per logical action, derived from what the orchestrator knows.
// The Python client's action_key() gives the same key for the same inputs (a shared table of cases
// is checked in both: clients/python/tests/action_key_cases.json).

/** What action keys start with: keys from the run, told apart at a glance from random ones. */
export const ACTION_KEY_PREFIX = "act-";

/**
 * Canonical JSON (RFC 8785, the JSON Canonicalization Scheme, as the `canonicalize` package writes
 * it): object members sorted by their names' UTF-16 code units, no whitespace, strings and numbers as
 * JSON.stringify writes them. Throws on what JSON cannot hold (NaN, Infinity, undefined, functions,
 * bigint).
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new TypeError(`${value} is not a JSON number`);
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item)).join(",")}]`;
  if (typeof value === "object") {
    const record = value as Record<string, unknown>;
    if (typeof (record as { toJSON?: unknown }).toJSON === "function") return canonicalJson((record as { toJSON: () => unknown }).toJSON());
    // default sort compares UTF-16 code units, as RFC 8785 asks
    const names = Object.keys(record).filter((name) => record[name] !== undefined).sort();
    return `{${names.map((name) => `${JSON.stringify(name)}:${canonicalJson(record[name])}`).join(",")}}`;
  }
  throw new TypeError(`${typeof value} is not JSON`);
}

/**
 * A stable key for one logical action: "act-" and the SHA-256 (hex) of the canonical JSON of
 * `[runId, step, tool, args]` — 68 printable ASCII characters. The same run (or thread) id, step, tool
 * and arguments give the same key in every process, in TypeScript and in Python (`action_key`); a
 * retry, a resumed run or a model re-emitting the same call gets the same key. A framework's tool-call
 * id is not a key: several frameworks mint a new one on every attempt. Web Crypto's SHA-256, so it is
 * async (Node 20 and browsers alike).
 */
export async function actionKey(runId: string, step: number | string, tool: string, args: Record<string, unknown>): Promise<string> {
  if (typeof runId !== "string" || runId === "") throw new TypeError("actionKey: runId must be a non-empty string (the run's or thread's id)");
  if (typeof step !== "string" && !(typeof step === "number" && Number.isInteger(step))) throw new TypeError("actionKey: step must be an integer or a string");
  if (typeof tool !== "string" || tool === "") throw new TypeError("actionKey: tool must be a non-empty string");
  if (typeof args !== "object" || args === null || Array.isArray(args)) throw new TypeError("actionKey: args must be an object of the tool's arguments");
  const text = canonicalJson([runId, step, tool, args]);
  const digest = await globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return ACTION_KEY_PREFIX + Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}
