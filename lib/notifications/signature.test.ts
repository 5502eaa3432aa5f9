import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { signatureHeader, verifySignature } from "./signature";

const SECRET = "whsec_0123456789abcdef";
const BODY = JSON.stringify({ id: "evt_1", type: "key.unknown" });
const NOW = 1_800_000_000_000;

describe("webhook signatures", () => {
  it("signs t.body with HMAC-SHA256, as Stripe does, and verifies it", () => {
    const header = signatureHeader(SECRET, BODY, NOW);
    const t = NOW / 1000;
    expect(header).toBe(`t=${t},v1=${createHmac("sha256", SECRET).update(`${t}.${BODY}`).digest("hex")}`);
    expect(verifySignature(header, BODY, SECRET, { nowMs: NOW + 10_000 })).toEqual({ ok: true, timestampSec: t });
  });

  it("rejects another body, another secret, an old timestamp, a forged or missing header", () => {
    const header = signatureHeader(SECRET, BODY, NOW);
    expect(verifySignature(header, BODY.replace("unknown", "stuck"), SECRET, { nowMs: NOW })).toEqual({ ok: false, reason: "no signature matches the body" });
    expect(verifySignature(header, BODY, "whsec_another_secret_000", { nowMs: NOW })).toMatchObject({ ok: false });
    expect(verifySignature(header, BODY, SECRET, { nowMs: NOW + 301_000 })).toEqual({ ok: false, reason: "the timestamp is outside the tolerance" });
    // the timestamp is signed: moving it forward breaks the signature
    const moved = header.replace(/^t=\d+/, `t=${NOW / 1000 + 60}`);
    expect(verifySignature(moved, BODY, SECRET, { nowMs: NOW + 60_000 })).toEqual({ ok: false, reason: "no signature matches the body" });
    expect(verifySignature(`t=${NOW / 1000},v1=${"0".repeat(64)}`, BODY, SECRET, { nowMs: NOW })).toMatchObject({ ok: false });
    expect(verifySignature(`t=${NOW / 1000},v1=abc`, BODY, SECRET, { nowMs: NOW })).toEqual({ ok: false, reason: "no v1 signature in the signature header" });
    expect(verifySignature(undefined, BODY, SECRET, { nowMs: NOW })).toMatchObject({ ok: false });
  });

  it("accepts any one of several v1 signatures (a secret being rotated)", () => {
    const old = signatureHeader("whsec_old_secret_000000", BODY, NOW);
    const current = signatureHeader(SECRET, BODY, NOW);
    expect(verifySignature(`${old},v1=${current.split("v1=")[1]}`, BODY, SECRET, { nowMs: NOW })).toMatchObject({ ok: true });
  });
});
