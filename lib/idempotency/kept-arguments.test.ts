import { describe, expect, it } from "vitest";
import { canonicalJson } from "./fingerprint";
import { argumentRetentionProblem, keptArguments, looksSecret, MAX_KEPT_ARGUMENTS_BYTES, REDACTED } from "./kept-arguments";

const kept = (args: unknown, keep: "redacted" | "full" | "none" = "redacted", redact: string[] = []) => {
  const k = keptArguments(args, { keep, redact });
  return k === null ? null : { kept: k.kept, value: JSON.parse(k.json) as unknown, json: k.json };
};

describe("keptArguments", () => {
  it("redacts secret-looking names by default and keeps the rest, as canonical JSON", () => {
    const out = kept({
      customerId: "cus_42",
      amountCents: 1999,
      password: "hunter2",
      client_secret: "cs_1",
      accessToken: "tok",
      card: { number: "4242424242424242", cvc: "123", exp_month: 12 },
      cardNumber: "4000056655665556",
      iban: "DE89370400440532013000",
      max_tokens: 256,
      nested: [{ apiKey: "k", note: "fine" }],
    });
    expect(out).toEqual({
      kept: "redacted",
      value: {
        customerId: "cus_42",
        amountCents: 1999,
        password: REDACTED,
        client_secret: REDACTED,
        accessToken: REDACTED,
        card: { number: REDACTED, cvc: REDACTED, exp_month: 12 },
        cardNumber: REDACTED,
        iban: REDACTED,
        max_tokens: 256,
        nested: [{ apiKey: REDACTED, note: "fine" }],
      },
      json: expect.stringMatching(/^\{"accessToken":"\[redacted\]","amountCents":1999,/),
    });
  });

  it("redacts the tool's JSON pointers, array items and escaped names included; a pointer to nothing changes nothing", () => {
    const args = { customer: { email: "a@example.com", name: "Ada" }, items: [{ sku: "x" }, { sku: "y" }], "a/b": 1, "m~n": 2 };
    expect(kept(args, "redacted", ["/customer/email", "/items/1/sku", "/a~1b", "/m~0n", "/missing/deep", "/items/9"])?.value).toEqual({
      customer: { email: REDACTED, name: "Ada" },
      items: [{ sku: "x" }, { sku: REDACTED }],
      "a/b": REDACTED,
      "m~n": REDACTED,
    });
  });

  it("keeps everything under full, and nothing under none", () => {
    expect(kept({ password: "p", n: 1 }, "full")).toMatchObject({ kept: "full", value: { password: "p", n: 1 } });
    expect(kept({ password: "p" }, "none")).toBeNull();
  });

  it("does not change the arguments it was given", () => {
    const args = { password: "p", card: { number: "4242" } };
    kept(args, "redacted", ["/card"]);
    expect(args).toEqual({ password: "p", card: { number: "4242" } });
  });

  it("caps redacted arguments at 8 KiB: long strings are cut first, then members that still do not fit", () => {
    const long = kept({ body: "x".repeat(20_000), subject: "hello" });
    expect(Buffer.byteLength(long!.json)).toBeLessThanOrEqual(MAX_KEPT_ARGUMENTS_BYTES);
    expect(long!.value).toEqual({ body: `${"x".repeat(512)}…[19488 more characters]`, subject: "hello" });

    const many = kept({ a: "keep me", rows: Array.from({ length: 2_000 }, (_, i) => ({ i, label: `row ${i}` })) });
    expect(Buffer.byteLength(many!.json)).toBeLessThanOrEqual(MAX_KEPT_ARGUMENTS_BYTES);
    const rows = (many!.value as { rows: unknown[] }).rows;
    expect((many!.value as { a: string }).a).toBe("keep me");
    expect(rows[0]).toEqual({ i: 0, label: "row 0" });
    expect(rows.at(-1)).toMatch(/^\[cut: \d+ more items\]$/);

    const wide = kept(Object.fromEntries(Array.from({ length: 3_000 }, (_, i) => [`field${i}`, i])));
    expect(Buffer.byteLength(wide!.json)).toBeLessThanOrEqual(MAX_KEPT_ARGUMENTS_BYTES);
  });

  it("keeps a NUL character (which PostgreSQL's jsonb refuses) as U+FFFD, in names too", () => {
    expect(kept({ "a\u0000b": "x\u0000y" })!.value).toEqual({ "a\uFFFDb": "x\uFFFDy" });
    expect(kept({ note: "x\u0000y" }, "full")!.value).toEqual({ note: "x\uFFFDy" });
  });

  it("keeps the same copy whether it is handed the arguments' canonical JSON (as the engine does) or not", () => {
    const cases = [
      { customerId: "cus_1", amountCents: 5, "10": "a", "9": "b", nested: { z: 1, a: [2, { y: "x" }] } },
      { customerId: "cus_1", password: "p", card: "4242 4242 4242 4242", note: "Bearer abcdef123456" },
      { "a\u0000b": "x\u0000y" },
      { body: "x".repeat(20_000) },
      ["list", { apiKey: "k" }],
      "text",
    ];
    for (const args of cases) {
      for (const retention of [{ keep: "redacted" as const, redact: ["/note"] }, { keep: "full" as const, redact: [], writeOnly: ["/card"] }, { keep: "redacted" as const, redact: [] }]) {
        expect(keptArguments(args, retention, canonicalJson(args)), JSON.stringify(args).slice(0, 40)).toEqual(keptArguments(args, retention));
      }
    }
    // nothing to redact: the arguments' canonical JSON as it is
    expect(keptArguments({ b: 1, a: "x" })).toEqual({ json: '{"a":"x","b":1}', kept: "redacted" });
  });

  it("leaves a member named __proto__ out of the redacted copy", () => {
    const args = JSON.parse('{"a":1,"__proto__":{"b":2},"c":{"__proto__":"x","d":3}}') as unknown;
    expect(kept(args)!.json).toBe('{"a":1,"c":{"d":3}}');
  });

  it("keeps full arguments uncut", () => {
    expect(kept({ body: "x".repeat(20_000) }, "full")!.json.length).toBeGreaterThan(20_000);
  });
});

describe("looksSecret", () => {
  it("tells secrets' names from others", () => {
    for (const name of ["password", "newPassword", "db_passwd", "secret", "clientSecret", "token", "refresh_token", "idToken", "cvc", "CVV", "iban", "card_number", "cardNo", "apiKey", "API_KEY", "private_key", "Authorization", "pin"]) {
      expect(looksSecret(name), name).toBe(true);
    }
    for (const name of ["customerId", "amountCents", "max_tokens", "description", "subject", "secretary_name".replace("secretary", "assistant"), "number", "keyboard"]) {
      expect(looksSecret(name), name).toBe(false);
    }
    expect(looksSecret("number", "card")).toBe(true);
    expect(looksSecret("number", "invoice")).toBe(false);
  });

  it("answers by what the member holds and the object it is in, asked in any order and again", () => {
    const asked: [string, string | null, unknown, boolean][] = [
      ["card", null, "4242", true],
      ["card", null, { brand: "visa" }, false],
      ["auth", null, "Basic x", true],
      ["auth", null, { method: "oauth" }, false],
      ["token", null, "t0k", true],
      ["token", null, 7, false],
      ["number", "card", "1", true],
      ["number", null, "1", false],
      ["number", "invoice", "1", false],
      ["number", "", "1", false],
    ];
    for (const order of [asked, [...asked].reverse(), asked]) {
      for (const [name, parent, value, secret] of order) expect(looksSecret(name, parent, value), `${parent}/${name} = ${JSON.stringify(value)}`).toBe(secret);
    }
  });
});

describe("argumentRetentionProblem", () => {
  it("names a bad policy or pointer", () => {
    expect(argumentRetentionProblem({ keep: "redacted", redact: ["/card/number"] })).toBeNull();
    expect(argumentRetentionProblem({ keep: "some" })).toMatch(/redacted", "none" or "full"/);
    expect(argumentRetentionProblem({ redact: ["card.number"] })).toMatch(/"card.number" is not a JSON pointer/);
    expect(argumentRetentionProblem({ keep: "full", redact: ["/a"] })).toMatch(/redact is for arguments: redacted/);
  });
});
