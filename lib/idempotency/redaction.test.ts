import { describe, expect, it } from "vitest";
import { keptArguments } from "./kept-arguments";
import { looksSecret, REDACTED, redactAnswerText, redactText, redactValue } from "./redaction";
import { writeOnlyPaths } from "@/lib/tools/write-only-paths";

// What operators are never shown of a call's arguments or answers: a table of names and values,
// each either redacted or kept, read through keptArguments as a call's arguments are kept.

const keptValue = (args: Record<string, unknown>) => JSON.parse(keptArguments(args)!.json) as Record<string, unknown>;

/** [name, value]: the value is never kept under this name. */
const REDACTED_NAMES: [string, unknown][] = [
  ["password", "hunter2"],
  ["newPassword", "hunter3"],
  ["db_passwd", "pw"],
  ["passcode", "8812"],
  ["passCode", "8812"],
  ["passphrase", "correct horse"],
  ["secret", "s3"],
  ["client_secret", "cs_1"],
  ["clientSecret", "cs_2"],
  ["token", "tok_1"],
  ["tokens", ["tok_1", "tok_2"]],
  ["accessToken", "at"],
  ["refresh_token", "rt"],
  ["idToken", "it"],
  ["session_tokens", ["st"]],
  ["card", "4000 0566 5566 5556"],
  ["creditCard", "5555555555554444"],
  ["card_number", "4242"],
  ["cardNumber", "4242"],
  ["ccNumber", "4242"],
  ["cc_num", "4242"],
  ["cvc", "123"],
  ["CVV", "123"],
  ["iban", "DE89370400440532013000"],
  ["pin", "0000"],
  ["auth", "Basic dXNlcjpwYXNz"],
  ["basicAuth", "user:pass"],
  ["auth_header", "x"],
  ["authCode", "ac_1"],
  ["Authorization", "Bearer abc"],
  ["apiKey", "k"],
  ["API_KEY", "k"],
  ["x-api-key", "k"],
  ["stripe_key", "rk_1"],
  ["stripeKey", "rk_2"],
  ["signing_key", "sk"],
  ["encryptionKey", "ek"],
  ["private_key", "pk"],
  ["access_key", "ak"],
  ["credentials", "c"],
  ["otp", "123456"],
  ["cookie", "sid=1"],
  ["ssn", "078-05-1120"],
  ["webhookSecret", "whsec"],
];

/** [name, value]: an ordinary name, kept as sent. */
const KEPT_NAMES: [string, unknown][] = [
  ["customerId", "cus_42"],
  ["amountCents", 1999],
  ["tokenizer", "cl100k"],
  ["cardinality", 12],
  ["author", "Ada Lovelace"],
  ["authority", "ca.example"],
  ["authMethod", "oauth"],
  ["auth_type", "basic"],
  ["max_tokens", 256],
  ["maxTokens", 256],
  ["prompt_tokens", 10],
  ["completionTokens", 11],
  ["token_count", 9],
  ["key", "order-1"],
  ["idempotencyKey", "order-1"],
  ["idempotency_key", "order-1"],
  ["sortKey", "name"],
  ["partition_key", "p1"],
  ["publicKey", "ssh-ed25519 AAAA"],
  ["keyId", "kid_1"],
  ["keys", ["a", "b"]],
  ["keyboard", "qwerty"],
  ["card_brand", "visa"],
  ["cardBrand", "visa"],
  ["card_last4", "4242"],
  ["cardholder_name", "Ada"],
  ["description", "a pinned note"],
  ["subject", "Your receipt"],
  ["number", "INV-7"],
  ["cc", "ops@example.com"],
  ["passed", true],
  ["spinner", "dots"],
  ["pinned", true],
  ["createdAtMs", 1_800_000_000_000],
  ["orderNumber", "4000000000000000001"],
  ["phone", "+4915112345678"],
  ["sessionId", "s-1"],
  ["currency", "EUR"],
  ["quantity", 3],
  ["note", "charged once"],
];

/** Values that are secrets whatever name they are under (here an ordinary one: `note`). */
const SECRET_VALUES: string[] = [
  "4242424242424242",
  "4242 4242 4242 4242",
  "4242-4242-4242-4242",
  "378282246310005",
  "6011111111111117",
  "sk_live_51H8abcdefGHIJKLmnop",
  "sk_test_4eC39HqLyjWDarjtT1zdp7dc",
  "rk_live_51H8abcdefGHIJKLmnop",
  "ghp_1234567890abcdefghijABCDEFGHIJ123456",
  "gho_1234567890abcdefghijABCDEFGHIJ123456",
  "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
  "xoxb-1234567890-0987654321-AbCdEfGhIjKl",
  "xoxp-1234567890-0987654321-AbCdEfGhIjKl",
  "AKIAIOSFODNN7EXAMPLE",
  "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
  "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----",
  "idg_kgqTRitbZx20hKoYWaQ_RsV1e4cndxy4I60nZD5YHG0",
];

describe("names", () => {
  it(`redacts ${REDACTED_NAMES.length} secret names and keeps ${KEPT_NAMES.length} ordinary ones, in the kept arguments`, () => {
    expect(REDACTED_NAMES.length + KEPT_NAMES.length).toBeGreaterThanOrEqual(80);
    const args = Object.fromEntries([...REDACTED_NAMES, ...KEPT_NAMES]);
    const kept = keptValue(args);
    for (const [name] of REDACTED_NAMES) expect(kept[name], name).toBe(REDACTED);
    for (const [name, value] of KEPT_NAMES) expect(kept[name], name).toEqual(value);
  });

  it("judges a card or auth object member by member: its number goes, its brand and expiry stay", () => {
    expect(keptValue({ card: { number: "4242424242424242", cvc: "123", exp_month: 12, brand: "visa" }, auth: { user: "ada", password: "pw", method: "basic" } })).toEqual({
      card: { number: REDACTED, cvc: REDACTED, exp_month: 12, brand: "visa" },
      auth: { user: "ada", password: REDACTED, method: "basic" },
    });
    expect(looksSecret("number", "card")).toBe(true);
    expect(looksSecret("number", "invoice")).toBe(false);
  });
});

describe("values", () => {
  it(`redacts ${SECRET_VALUES.length} secrets by their form under any name, alone or inside a text`, () => {
    for (const value of SECRET_VALUES) {
      expect(keptValue({ note: value }).note, value).toBe(REDACTED);
      const inText = keptValue({ note: `declined: ${value} (see logs)` }).note as string;
      expect(inText, value).toBe(`declined: ${REDACTED} (see logs)`);
    }
    expect(keptValue({ n: 4242424242424242 }).n).toBe(REDACTED);
  });

  it("keeps the credential's scheme and a URL's user, not the credential", () => {
    expect(redactText("Authorization: Bearer abc.def-123_456")).toBe(`Authorization: Bearer ${REDACTED}`);
    expect(redactText("Basic dXNlcjpwYXNzd29yZA==")).toBe(`Basic ${REDACTED}`);
    expect(redactText("postgres://app:s3cr3t@db.internal:5432/ledger")).toBe(`postgres://app:${REDACTED}@db.internal:5432/ledger`);
    expect(redactText("GET /cb?code=1&access_token=abc&state=x")).toBe(`GET /cb?code=1&access_token=${REDACTED}&state=x`);
  });

  it("keeps numbers and texts that only look alike: a failed Luhn check, timestamps, ids, prose", () => {
    for (const value of [
      "4242424242424241", // not Luhn-valid
      "1800000000000", // epoch ms
      "1765000000000000", // epoch µs
      "1234567890123456789", // a snowflake id
      "order 12345678901", // too short
      "Basic authentication failed",
      "Bearer realm=api",
      "the sk_live_ prefix",
      "task-list-0123456789abcdefghij",
      "keyboard layout",
    ]) {
      expect(keptValue({ note: value }).note, value).toBe(value);
    }
    expect(keptValue({ at: 1_800_000_000_000 }).at).toBe(1_800_000_000_000);
  });
});

describe("answers", () => {
  it("redacts an answer by names and values, as JSON, as a cut JSON text and as a form body", () => {
    const body = JSON.stringify({ error: "invalid_request", echo: { password: "hunter2", card: "4111111111111111", user: "ada" }, stripe_key: "sk_live_51H8abcdefGHIJKL" });
    const redacted = JSON.parse(redactAnswerText(body));
    expect(redacted).toEqual({ error: "invalid_request", echo: { password: REDACTED, card: REDACTED, user: "ada" }, stripe_key: REDACTED });
    // cut at 8 KiB, the JSON does not parse: its members are read as text
    const cut = redactAnswerText(body.slice(0, -20));
    expect(cut).not.toContain("hunter2");
    expect(cut).not.toContain("4111111111111111");
    expect(cut).toContain('"user":"ada"');
    expect(redactAnswerText("user=ada&passcode=8812&amount=5")).toBe(`user=ada&passcode=${REDACTED}&amount=5`);
    expect(redactAnswerText("<html>500: upstream said password=hunter2</html>")).not.toContain("hunter2");
  });

  it("redacts inside results kept as JSON text (an operator action's records)", () => {
    const record = { token: 7, result: { status: 200, body: JSON.stringify({ apiKey: "k_live", id: "key_1" }) } };
    // a number under a token's name (a reservation's fencing token) is no credential
    expect(redactValue(record)).toEqual({ token: 7, result: { status: 200, body: JSON.stringify({ apiKey: REDACTED, id: "key_1" }) } });
  });
});

describe("writeOnly", () => {
  const schema = {
    type: "object",
    properties: {
      user: { type: "string" },
      secretAnswer: { type: "string" },
      pinHint: { type: "string", writeOnly: true },
      cards: { type: "array", items: { $ref: "#/$defs/card" } },
      extra: { type: "object", additionalProperties: { type: "object", properties: { word: { writeOnly: true } } } },
    },
    $defs: { card: { type: "object", properties: { holder: { type: "string" }, code: { type: "string", writeOnly: true } } } },
  };

  it("finds the schema's writeOnly properties, through items, $ref and additionalProperties", () => {
    expect(writeOnlyPaths(schema).sort()).toEqual(["/cards/*/code", "/extra/*/word", "/pinHint"]);
  });

  it("never keeps them, under full too", () => {
    const args = { user: "ada", pinHint: "my cat", cards: [{ holder: "Ada", code: "x1" }, { holder: "Bob", code: "x2" }], extra: { a: { word: "w" } } };
    const expected = { user: "ada", pinHint: REDACTED, cards: [{ holder: "Ada", code: REDACTED }, { holder: "Bob", code: REDACTED }], extra: { a: { word: REDACTED } } };
    const writeOnly = writeOnlyPaths(schema);
    for (const keep of ["redacted", "full"] as const) {
      expect(JSON.parse(keptArguments(args, { keep, redact: [], writeOnly })!.json), keep).toEqual(expected);
    }
  });
});
