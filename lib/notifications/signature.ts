import { createHmac, timingSafeEqual } from "node:crypto";

/** The header every delivery carries: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, as Stripe signs its events. */
export const SIGNATURE_HEADER = "Idemgate-Signature";

/** How old a signature's timestamp may be before a receiver refuses it (replayed requests), by default. */
export const DEFAULT_TOLERANCE_SEC = 300;

function hmac(secret: string, timestampSec: number, body: string): string {
  return createHmac("sha256", secret).update(`${timestampSec}.${body}`, "utf8").digest("hex");
}

/** The header's value for this body, signed at `nowMs`. */
export function signatureHeader(secret: string, body: string, nowMs: number = Date.now()): string {
  const t = Math.floor(nowMs / 1000);
  return `t=${t},v1=${hmac(secret, t, body)}`;
}

export type VerifyResult = { ok: true; timestampSec: number } | { ok: false; reason: string };

/**
 * Checks a delivery as a receiver must: the header's timestamp is within `toleranceSec` of now, and
 * one of its `v1` signatures is the HMAC-SHA256 of `"<t>.<body>"` (the raw body, byte for byte, before
 * any JSON parsing) with the endpoint's secret, compared in constant time. Several `v1` entries are
 * accepted so that a secret can be rotated.
 */
export function verifySignature(header: string | null | undefined, body: string, secret: string, options: { toleranceSec?: number; nowMs?: number } = {}): VerifyResult {
  if (!header) return { ok: false, reason: `no ${SIGNATURE_HEADER} header` };
  let t: number | null = null;
  const signatures: string[] = [];
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === "t" && /^\d+$/.test(value)) t = Number(value);
    else if (name === "v1" && /^[0-9a-f]{64}$/.test(value)) signatures.push(value);
  }
  if (t === null) return { ok: false, reason: "no timestamp (t=) in the signature header" };
  if (signatures.length === 0) return { ok: false, reason: "no v1 signature in the signature header" };
  const nowSec = Math.floor((options.nowMs ?? Date.now()) / 1000);
  if (Math.abs(nowSec - t) > (options.toleranceSec ?? DEFAULT_TOLERANCE_SEC)) return { ok: false, reason: "the timestamp is outside the tolerance" };
  const expected = Buffer.from(hmac(secret, t, body), "hex");
  const matches = signatures.some((s) => timingSafeEqual(Buffer.from(s, "hex"), expected));
  return matches ? { ok: true, timestampSec: t } : { ok: false, reason: "no signature matches the body" };
}
