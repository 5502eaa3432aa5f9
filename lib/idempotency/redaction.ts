/**
 * What operators are never shown of a call's arguments or of an answer (DESIGN.md § Arguments kept
 * for operators): values under names that hold secrets, and values that are secrets whatever their
 * name (a card number, a well-known API token, a JWT, a PEM block, a bearer credential, a URL's
 * password). Names are read word by word (camelCase and snake_case segments), so `tokenizer`,
 * `cardinality` and `author` are not `token`, `card` and `auth`.
 */

/** What replaces a redacted value. */
export const REDACTED = "[redacted]";

/** Words that make any name holding them a secret's: `password`, `client_secret`, `cvc`, `iban`. */
const SECRET_WORDS = new Set([
  "password", "passwd", "passphrase", "passcode", "pwd", "secret", "secrets", "cvc", "cvv", "cvc2", "cvv2", "csc", "cvn", "iban", "pin",
  "authorization", "apikey", "credential", "credentials", "otp", "totp", "hotp", "cookie", "cookies", "jwt", "bearer", "ssn", "mnemonic",
]);
/** Two words in a row that name a secret: `card_number`, `ccNumber`, and `number` inside a `card` object. */
const SECRET_PAIRS = new Set([
  "card number", "card num", "card no", "cc number", "cc num", "cc no", "cc cvv", "cc cvc", "api key", "private key", "access key",
  "security code", "pass code", "pass phrase", "pass word", "auth pass",
]);
/** Names written as one word that hold one: `cardnumber`, `clientsecret`. */
const SECRET_PARTS = ["password", "passwd", "passcode", "secret", "cardnumber", "ccnumber", "apikey", "privatekey", "accesskey"];
/** With `token(s)`, a word that makes the name a count of tokens, not one: `max_tokens`, `promptTokens`. */
const TOKEN_COUNT_WORDS = new Set(["max", "min", "num", "count", "total", "limit", "prompt", "completion", "input", "output", "usage", "used", "remaining", "budget", "estimated", "cached", "reasoning"]);
/** After `auth`, a word that makes the name a setting, not a credential: `auth_method`, `authType`. */
const AUTH_SETTING_WORDS = new Set(["method", "methods", "type", "mode", "provider", "scheme", "url", "uri", "endpoint", "domain", "enabled", "required", "status", "flow", "level", "realm", "kind", "strategy"]);
/** Before a last word `key`, a word that makes it an identifier, not a credential: `idempotency_key`, `sortKey`, `publicKey`. */
const IDENTIFIER_KEY_WORDS = new Set([
  "idempotency", "idem", "dedupe", "dedup", "deduplication", "cache", "sort", "partition", "primary", "foreign", "object", "public", "lookup",
  "map", "routing", "shard", "row", "unique", "composite", "hash", "range", "search", "translation", "i18n", "message", "group", "index",
  "file", "entity", "event", "record", "resource", "item", "order", "customer", "user", "product", "correlation", "tracking", "trace",
  "request", "external", "natural", "surrogate", "join", "parent", "child", "cursor", "page", "next", "label", "display", "field", "column",
  "attribute", "property", "metadata", "meta", "tag", "name", "project", "issue", "lock", "queue", "topic", "stream", "schema", "locale",
  "type", "kind", "category", "mapping", "dictionary", "config", "setting", "settings", "s3", "blob", "path", "bucket", "dedupe",
]);

function wordsOf(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
}

/**
 * looksSecret's answers by (what the value is, parent, name): a tool's calls bring the same names
 * every time, and reading a name word by word costs more than the rest of its redaction. Bounded:
 * cleared when full; names longer than MAX_REMEMBERED_NAME are judged each time.
 */
const decided = new Map<string, boolean>();
const MAX_DECIDED = 4_096;
const MAX_REMEMBERED_NAME = 128;

/**
 * Whether a member's name says it holds a secret; `parent` is the name of the object it is in.
 * `value` is what it holds: `card` and `auth` name a secret when they hold one value (a card
 * number, a header), not when they hold an object (whose members are judged one by one).
 */
export function looksSecret(name: string, parent: string | null = null, value?: unknown): boolean {
  if (name.length + (parent?.length ?? 0) > MAX_REMEMBERED_NAME) return nameLooksSecret(name, parent, value);
  // all the answer reads of the value: whether it is a number, and whether it is one value or an object
  const kind = typeof value === "number" ? "n" : value !== null && typeof value === "object" ? "o" : "v";
  const rememberedAs = parent === null ? `${kind}|${name}` : `${kind}${parent.length}:${parent}|${name}`;
  let secret = decided.get(rememberedAs);
  if (secret === undefined) {
    secret = nameLooksSecret(name, parent, value);
    if (decided.size >= MAX_DECIDED) decided.clear();
    decided.set(rememberedAs, secret);
  }
  return secret;
}

function nameLooksSecret(name: string, parent: string | null, value: unknown): boolean {
  const words = wordsOf(name);
  if (words.length === 0) return false;
  if (words.some((w) => SECRET_WORDS.has(w))) return true;
  // a number under a token's name is a count or a fencing token (a reservation's), never a credential
  if (typeof value !== "number" && words.some((w) => /tokens?$/.test(w)) && !words.some((w) => TOKEN_COUNT_WORDS.has(w))) return true;
  const joined = words.join("");
  if (SECRET_PARTS.some((p) => joined.includes(p))) return true;
  const last = words[words.length - 1];
  const holdsOne = value === undefined || value === null || typeof value !== "object";
  if (holdsOne && (last === "card" || last === "cards")) return true;
  const auth = words.indexOf("auth");
  if (auth >= 0 && (auth === words.length - 1 ? holdsOne : !AUTH_SETTING_WORDS.has(words[auth + 1]))) return true;
  if ((last === "key" || last === "keys") && words.length > 1 && !IDENTIFIER_KEY_WORDS.has(words[words.length - 2])) return true;
  const withParent = parent === null ? words : [...wordsOf(parent).slice(-1), ...words];
  for (let i = 0; i + 1 < withParent.length; i++) if (SECRET_PAIRS.has(`${withParent[i]} ${withParent[i + 1]}`)) return true;
  return false;
}

/** Luhn's check, as card numbers pass it. */
function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return sum % 10 === 0;
}

/**
 * A card number: 13–19 digits (spaces or dashes between them allowed) that pass Luhn's check. Not
 * one starting with 0 or 1: no card network's numbers do, and epoch timestamps (ms, µs, ns) and
 * snowflake ids, which would pass one time in ten, all do.
 */
function isCardNumber(digits: string): boolean {
  return digits.length >= 13 && digits.length <= 19 && digits[0] >= "2" && luhn(digits);
}

// not after a "+": an international phone number
const CARD_IN_TEXT = /(?<![\d+])[2-9](?:[ -]?\d){12,18}(?![\d])/g;

/** Secrets recognised by their form, wherever they appear in a text. */
const SECRET_VALUES: RegExp[] = [
  // Stripe secret, restricted and webhook keys
  /\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{8,}/g,
  /\bwhsec_[A-Za-z0-9+/]{8,}/g,
  // GitHub tokens (personal, OAuth, user-to-server, server-to-server, refresh; fine-grained)
  /\bgh[pousr]_[A-Za-z0-9]{16,}/g,
  /\bgithub_pat_[A-Za-z0-9_]{16,}/g,
  // Slack bot, user, app tokens
  /\bxox[abpors]-[A-Za-z0-9-]{8,}/g,
  /\bxapp-[A-Za-z0-9-]{8,}/g,
  // AWS access key ids
  /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g,
  // GitLab, npm, Google API keys; OpenAI and Anthropic keys; Idemgate's own API and CLI tokens
  /\bglpat-[A-Za-z0-9_-]{16,}/g,
  /\bnpm_[A-Za-z0-9]{30,}/g,
  /\bAIza[0-9A-Za-z_-]{30,}/g,
  /\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}/g,
  /\bidgl?_[A-Za-z0-9_-]{20,}/g,
  // a JWT: base64url header and payload (both JSON objects: "eyJ"), then the signature
  /\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*/g,
  // a PEM block (a private key, a certificate), or its start when the text was cut
  /-----BEGIN [A-Z0-9 ]+-----[\s\S]*?(?:-----END [A-Z0-9 ]+-----|$)/g,
];

/** `Bearer <credential>` and `Basic <credential>` (one with a digit or `=`, so "Basic authentication" stays). */
const SCHEME_CREDENTIAL = /\b(Bearer|bearer|BEARER|Basic|basic)(\s+)(?=[A-Za-z._~+/-]*[0-9=])[A-Za-z0-9._~+/-]{8,}=*/g;
/** The password in a URL's user info: `postgres://user:[redacted]@host`. */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s/:@]+:)[^\s/@]+@/gi;
/** `"name": value` in a text that is not JSON any more (a cut body). */
const JSON_MEMBER = /("((?:[^"\\\n]|\\.){1,100})"\s*:\s*)("(?:[^"\\\n]|\\.)*"|-?\d[\d.eE+-]*)/g;
/** `name=value` in a query string, a form body or a log line. */
const ASSIGNMENT = /(?<![A-Za-z0-9_])([A-Za-z][A-Za-z0-9_.-]{0,60})=([^&\s"'<>;,]+)/g;

/**
 * Matches wherever one of the patterns redactSecretValues replaces would (case aside: it matches
 * more, never less), in one pass: a text it finds nothing in is left as it is without trying each.
 */
const MAY_HOLD_SECRET_VALUE = new RegExp([...SECRET_VALUES, SCHEME_CREDENTIAL, URL_PASSWORD, CARD_IN_TEXT].map((r) => `(?:${r.source})`).join("|"), "i");

/** Whether a string holds something SECRET_VALUES or the card rule recognise. */
export function holdsSecretValue(text: string): boolean {
  return redactSecretValues(text) !== text;
}

/** The text with each secret recognised by its form replaced by `[redacted]`. */
function redactSecretValues(text: string): string {
  if (!MAY_HOLD_SECRET_VALUE.test(text)) return text;
  let out = text;
  for (const pattern of SECRET_VALUES) out = out.replace(pattern, REDACTED);
  out = out.replace(SCHEME_CREDENTIAL, `$1$2${REDACTED}`);
  out = out.replace(URL_PASSWORD, `$1${REDACTED}@`);
  out = out.replace(CARD_IN_TEXT, (match) => (isCardNumber(match.replace(/[ -]/g, "")) ? REDACTED : match));
  return out;
}

/**
 * A text as operators may see it: secrets recognised by their form replaced, and so are the values
 * of `"name": value` and `name=value` whose name holds a secret (a body that is not JSON, or was cut).
 */
export function redactText(text: string): string {
  let out = redactSecretValues(text);
  // a member needs a quote, an assignment an equals sign
  if (!out.includes('"') && !out.includes("=")) return out;
  out = out.replace(JSON_MEMBER, (match, head: string, name: string) => (looksSecret(name) ? `${head}"${REDACTED}"` : match));
  out = out.replace(ASSIGNMENT, (match, name: string) => (looksSecret(name) ? `${name}=${REDACTED}` : match));
  return out;
}

/** The most of a string that is tried as JSON inside a value (a body kept as text). */
const MAX_NESTED_JSON = 1024 * 1024;

/**
 * A copy of a JSON value as operators may see it: the values under secret-looking names replaced,
 * and every string and number checked for secrets by their form. A string that holds JSON (a body
 * kept as text) is redacted inside and kept as JSON text.
 */
export function redactValue(value: unknown, parent: string | null = null): unknown {
  if (typeof value === "string") return redactString(value);
  if (typeof value === "number") return Number.isSafeInteger(value) && value > 0 && isCardNumber(String(value)) ? REDACTED : value;
  if (Array.isArray(value)) return value.map((v) => redactValue(v, parent));
  if (value === null || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = looksSecret(k, parent, v) ? REDACTED : redactValue(v, k);
  return out;
}

/**
 * redactValue for a value nobody else holds (JSON just parsed): objects and arrays are redacted in
 * place, and `changes.count` grows by one for each value replaced. Returns the value (a replaced
 * string or number when the root is one). A member named `__proto__` is left out, as the copy
 * redactValue builds leaves it out (an assignment to it sets the copy's prototype).
 */
export function redactOwnValue(value: unknown, parent: string | null, changes: { count: number }): unknown {
  if (typeof value === "string" || typeof value === "number") {
    const redacted = redactValue(value);
    if (redacted !== value) changes.count++;
    return redacted;
  }
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = redactOwnValue(value[i], parent, changes);
    return value;
  }
  const members = value as Record<string, unknown>;
  for (const k of Object.keys(members)) {
    if (k === "__proto__") {
      delete members[k];
      changes.count++;
    } else if (looksSecret(k, parent, members[k])) {
      members[k] = REDACTED;
      changes.count++;
    } else {
      members[k] = redactOwnValue(members[k], k, changes);
    }
  }
  return value;
}

function redactString(text: string): string {
  const trimmed = text.trimStart();
  if ((trimmed.startsWith("{") || trimmed.startsWith("[")) && text.length <= MAX_NESTED_JSON) {
    try {
      const parsed: unknown = JSON.parse(text);
      const redacted = redactValue(parsed);
      return JSON.stringify(redacted) === JSON.stringify(parsed) ? text : JSON.stringify(redacted);
    } catch {
      // not JSON (or cut): read as text
    }
  }
  return redactText(text);
}

/** An answer's body (text, JSON or not) as operators may see it. */
export function redactAnswerText(body: string): string {
  return redactString(body);
}

/** A JSON pointer's member names, unescaped (`~1` is `/`, `~0` is `~`). */
export function pointerParts(pointer: string): string[] {
  return pointer
    .split("/")
    .slice(1)
    .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));
}

/**
 * Replaces the values a path pattern names: a JSON pointer whose member `*` stands for every array
 * item or every member (the paths of a schema's `writeOnly` properties, `/cards/*\/number`).
 * Returns how many it replaced.
 */
export function redactPattern(root: unknown, pattern: string): number {
  let replaced = 0;
  const walk = (at: unknown, parts: string[]) => {
    if (at === null || typeof at !== "object" || parts.length === 0) return;
    const [part, ...rest] = parts;
    const container = at as Record<string, unknown>;
    const names = part === "*" ? Object.keys(container) : Object.hasOwn(container, part) ? [part] : [];
    for (const name of names) {
      if (Array.isArray(at) && !/^(0|[1-9]\d*)$/.test(name)) continue;
      if (rest.length === 0) {
        container[name] = REDACTED;
        replaced++;
      } else walk(container[name], rest);
    }
  };
  walk(root, pointerParts(pattern));
  return replaced;
}
