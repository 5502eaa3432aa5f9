import { canonicalJson } from "./fingerprint";
import { pointerParts, REDACTED, redactOwnValue, redactPattern } from "./redaction";

export { looksSecret, REDACTED } from "./redaction";

/**
 * How much of a call's arguments its execution keeps for operators (DESIGN.md § Arguments kept for
 * operators): `redacted` (the default) with the values at the tool's JSON pointers and under
 * secret-looking names replaced, capped; `full`; or `none` (the fingerprint only).
 */
export type ArgumentsPolicy = "redacted" | "none" | "full";

export interface ArgumentRetention {
  keep: ArgumentsPolicy;
  /** JSON pointers (RFC 6901) of values to redact besides the secret-looking names; for `redacted` only */
  redact: string[];
  /**
   * the paths of the arguments' schema's `writeOnly` properties, never kept whatever the policy: JSON
   * pointers whose member `*` stands for every array item or member (`/cards/*\/number`)
   */
  writeOnly?: string[];
}

export const DEFAULT_ARGUMENT_RETENTION: ArgumentRetention = Object.freeze({ keep: "redacted", redact: Object.freeze([]) as unknown as string[] });

/** The most a `redacted` execution keeps of its arguments (canonical JSON, UTF-8). */
export const MAX_KEPT_ARGUMENTS_BYTES = 8 * 1024;

/** A string longer than this (in characters) is cut first when the arguments exceed the cap. */
const LONG_STRING = 512;

/** A JSON pointer as RFC 6901 writes one: `/card/number`, `/items/0/iban`, `/a~1b` for the member `a/b`. */
export const JSON_POINTER = /^(\/([^~/]|~[01])*)+$/;

/** The arguments as an execution keeps them: canonical JSON and how it was kept; null keeps nothing. */
export interface KeptArguments {
  json: string;
  kept: "redacted" | "full";
}

/** Replaces the value at the pointer, when there is one; returns whether there was. */
function redactAt(root: unknown, pointer: string): boolean {
  const parts = pointerParts(pointer);
  let at: unknown = root;
  for (let i = 0; i < parts.length; i++) {
    if (at === null || typeof at !== "object") return false;
    const part = parts[i];
    const container = at as Record<string, unknown> & unknown[];
    if (Array.isArray(at) && !/^(0|[1-9]\d*)$/.test(part)) return false;
    if (!Object.hasOwn(container, part)) return false;
    if (i === parts.length - 1) container[part as never] = REDACTED as never;
    else at = container[part as never];
  }
  return true;
}

const bytes = (text: string) => Buffer.byteLength(text, "utf8");

function cutString(s: string, keep: number): string {
  return s.length <= keep ? s : `${s.slice(0, keep)}…[${s.length - keep} more characters]`;
}

/**
 * Fits canonical arguments under `max` bytes: long strings are cut first; then, member by member
 * (in canonical order), what still does not fit is replaced by a note of its size.
 */
function fit(value: unknown, max: number): unknown {
  const shortened = shortenStrings(value);
  if (bytes(canonicalJson(shortened)) <= max) return shortened;
  return fitWithin(shortened, max);
}

function shortenStrings(value: unknown): unknown {
  if (typeof value === "string") return cutString(value, LONG_STRING);
  if (Array.isArray(value)) return value.map(shortenStrings);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shortenStrings(v)]));
}

function fitWithin(value: unknown, budget: number): unknown {
  const size = bytes(canonicalJson(value));
  if (size <= budget) return value;
  const note = `[cut: ${size} bytes]`;
  if (value === null || typeof value !== "object" || budget < 64) return note;
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    let used = 2;
    for (let i = 0; i < value.length; i++) {
      const left = budget - used - 40;
      const item = fitWithin(value[i], Math.max(0, left));
      const itemSize = bytes(canonicalJson(item)) + 1;
      if (used + itemSize > budget - 40) {
        out.push(`[cut: ${value.length - i} more items]`);
        break;
      }
      out.push(item);
      used += itemSize;
    }
    return out;
  }
  const out: Record<string, unknown> = {};
  let used = 2;
  // canonical order, so the same arguments are always cut the same way
  const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  for (const [k, v] of entries) {
    const keySize = bytes(JSON.stringify(k)) + 2;
    const left = budget - used - keySize;
    const kept = fitWithin(v, Math.max(0, left));
    const entrySize = keySize + bytes(canonicalJson(kept));
    if (used + entrySize > budget) {
      out[k] = "[cut]";
      used += keySize + 7;
      if (used > budget) break;
      continue;
    }
    out[k] = kept;
    used += entrySize;
  }
  return out;
}

/**
 * The arguments as the tool's policy keeps them, as canonical JSON; null when it keeps none.
 * `redacted`: the values at its pointers, under secret-looking names and those that are secrets by
 * their form (lib/idempotency/redaction.ts) are `"[redacted]"`, and the whole is cut to
 * MAX_KEPT_ARGUMENTS_BYTES. `full`: as they were sent. Under either, the schema's writeOnly
 * properties are never kept.
 */
export function keptArguments(args: unknown, retention: ArgumentRetention = DEFAULT_ARGUMENT_RETENTION, canonical?: string): KeptArguments | null {
  if (retention.keep === "none") return null;
  const sent = canonical ?? canonicalJson(args ?? {});
  const { copy, changes } = withPolicyApplied(sent, retention);
  if (retention.keep === "full") return { json: changes > 0 ? canonicalJson(copy) : sent, kept: "full" };
  const redactions = { count: changes };
  let redacted = redactOwnValue(copy, null, redactions);
  let json = redactions.count > 0 ? canonicalJson(redacted) : sent;
  if (bytes(json) > MAX_KEPT_ARGUMENTS_BYTES) {
    redacted = fit(redacted, MAX_KEPT_ARGUMENTS_BYTES);
    json = canonicalJson(redacted);
    // the size of the arguments before their redaction (the copy was redacted in place)
    if (bytes(json) > MAX_KEPT_ARGUMENTS_BYTES) json = JSON.stringify({ "[cut]": `${bytes(canonicalJson(withPolicyApplied(sent, retention).copy))} bytes of arguments, too many members to keep` });
  }
  return { json, kept: "redacted" };
}

/**
 * A copy of the arguments (their canonical JSON) of its own, with U+0000 replaced, the schema's
 * writeOnly properties and (for `redacted`) the values at the tool's pointers redacted; and how many
 * of these changed something: while none did, the copy's canonical JSON is the arguments' own.
 */
function withPolicyApplied(sent: string, retention: ArgumentRetention): { copy: unknown; changes: number } {
  // canonical JSON writes U+0000 as \u0000: without one, withoutNul would change nothing
  const hasNul = sent.includes("\\u0000");
  const copy: unknown = hasNul ? withoutNul(JSON.parse(sent)) : JSON.parse(sent);
  let changes = hasNul ? 1 : 0;
  for (const path of retention.writeOnly ?? []) changes += redactPattern(copy, path);
  if (retention.keep === "redacted") for (const pointer of retention.redact) if (redactAt(copy, pointer)) changes++;
  return { copy, changes };
}

const NUL = /\u0000/g;

/**
 * PostgreSQL's jsonb cannot hold U+0000 in a string or a name: a call whose arguments carry one
 * would fail its intent and never run. The kept copy shows U+FFFD in its place.
 */
function withoutNul(value: unknown): unknown {
  if (typeof value === "string") return value.includes("\u0000") ? value.replace(NUL, "\uFFFD") : value;
  if (Array.isArray(value)) return value.map(withoutNul);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [withoutNul(k) as string, withoutNul(v)]));
}

/** The problem with a tool's argument policy, or null: a pointer that is not one, or pointers for a policy that does not redact. */
export function argumentRetentionProblem(retention: { keep?: string; redact?: unknown }): string | null {
  if (retention.keep !== undefined && !["redacted", "none", "full"].includes(retention.keep)) return `arguments must be "redacted", "none" or "full", not ${JSON.stringify(retention.keep)}`;
  if (retention.redact === undefined) return null;
  if (!Array.isArray(retention.redact)) return "redact must be a list of JSON pointers";
  const bad = retention.redact.find((p) => typeof p !== "string" || !JSON_POINTER.test(p));
  if (bad !== undefined) return `redact: ${JSON.stringify(bad)} is not a JSON pointer such as /card/number`;
  if (retention.redact.length > 0 && retention.keep !== undefined && retention.keep !== "redacted") return `redact is for arguments: redacted (this tool keeps ${retention.keep})`;
  return null;
}
