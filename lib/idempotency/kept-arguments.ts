import { canonicalJson } from "./fingerprint";

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
}

export const DEFAULT_ARGUMENT_RETENTION: ArgumentRetention = Object.freeze({ keep: "redacted", redact: Object.freeze([]) as unknown as string[] });

/** What replaces a redacted value. */
export const REDACTED = "[redacted]";

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

/**
 * Words that make a member's name a secret's: `password`, `client_secret`, `accessToken`, `cvc`,
 * `iban`. A name is split into words at case changes and non-alphanumerics; `max_tokens` (a count)
 * is not `token`.
 */
const SECRET_WORDS = new Set(["password", "passwd", "passphrase", "pwd", "secret", "cvc", "cvv", "cvc2", "cvv2", "csc", "iban", "pin", "authorization", "apikey", "credential", "credentials"]);
/** Two words in a row that name a secret: `card_number`, `cardNumber`, and `number` inside a `card` object. */
const SECRET_PAIRS = new Set(["card number", "card num", "card no", "api key", "private key", "access key", "security code"]);
/** Names written as one word that hold one: `cardnumber`, `clientsecret`. */
const SECRET_PARTS = ["password", "passwd", "secret", "cardnumber", "apikey", "privatekey", "accesskey"];

function wordsOf(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
}

/** Whether a member's name looks like it holds a secret; `parent` is the name of the object it is in. */
export function looksSecret(name: string, parent: string | null = null): boolean {
  const words = wordsOf(name);
  if (words.some((w) => SECRET_WORDS.has(w) || w.endsWith("token"))) return true;
  const joined = words.join("");
  if (SECRET_PARTS.some((p) => joined.includes(p))) return true;
  const withParent = parent === null ? words : [...wordsOf(parent).slice(-1), ...words];
  for (let i = 0; i + 1 < withParent.length; i++) if (SECRET_PAIRS.has(`${withParent[i]} ${withParent[i + 1]}`)) return true;
  return false;
}

/** A pointer's member names, unescaped (`~1` is `/`, `~0` is `~`). */
function pointerParts(pointer: string): string[] {
  return pointer
    .split("/")
    .slice(1)
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
}

/** Replaces the value at the pointer, when there is one. */
function redactAt(root: unknown, pointer: string): void {
  const parts = pointerParts(pointer);
  let at: unknown = root;
  for (let i = 0; i < parts.length; i++) {
    if (at === null || typeof at !== "object") return;
    const part = parts[i];
    const container = at as Record<string, unknown> & unknown[];
    if (Array.isArray(at) && !/^(0|[1-9]\d*)$/.test(part)) return;
    if (!Object.hasOwn(container, part)) return;
    if (i === parts.length - 1) container[part as never] = REDACTED as never;
    else at = container[part as never];
  }
}

/** A copy with the values under secret-looking names replaced. */
function redactNames(value: unknown, parent: string | null): unknown {
  if (Array.isArray(value)) return value.map((v) => redactNames(v, parent));
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = looksSecret(k, parent) ? REDACTED : redactNames(v, k);
  return out;
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
 * `redacted`: the values at its pointers and under secret-looking names are `"[redacted]"`, and
 * the whole is cut to MAX_KEPT_ARGUMENTS_BYTES. `full`: as they were sent.
 */
export function keptArguments(args: unknown, retention: ArgumentRetention = DEFAULT_ARGUMENT_RETENTION): KeptArguments | null {
  if (retention.keep === "none") return null;
  // a copy: the call goes on with the arguments as they were sent
  const copy = withoutNul(JSON.parse(canonicalJson(args ?? {})) as unknown);
  if (retention.keep === "full") return { json: canonicalJson(copy), kept: "full" };
  for (const pointer of retention.redact) redactAt(copy, pointer);
  let redacted = redactNames(copy, null);
  let json = canonicalJson(redacted);
  if (bytes(json) > MAX_KEPT_ARGUMENTS_BYTES) {
    redacted = fit(redacted, MAX_KEPT_ARGUMENTS_BYTES);
    json = canonicalJson(redacted);
    if (bytes(json) > MAX_KEPT_ARGUMENTS_BYTES) json = JSON.stringify({ "[cut]": `${bytes(canonicalJson(copy))} bytes of arguments, too many members to keep` });
  }
  return { json, kept: "redacted" };
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
