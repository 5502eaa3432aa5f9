import type { HeaderSource } from "./answer";

/**
 * Whether the browser reached the console over HTTPS, so its session cookie can be `Secure`.
 *
 * Without a trusted proxy (IDEMGATE_TRUSTED_PROXY unset or 0), X-Forwarded-Proto is the scheme of the
 * server's own connection: scripts/serve.mjs replaces whatever a client wrote there before Next.js
 * sees the request. With `trustedProxies` = n it is what the proxies say: the entry the outermost of
 * them wrote, the n-th from the right when each appends to the header, or the only one when they
 * replace it (nginx's `proxy_set_header X-Forwarded-Proto $scheme`).
 */
export function servedOverHttps(headers: HeaderSource, trustedProxies: number): boolean {
  const entries = (headers.get("x-forwarded-proto") ?? "")
    .split(",")
    .map((entry) => entry.trim().toLowerCase())
    .filter((entry) => entry !== "");
  if (entries.length === 0) return false;
  if (trustedProxies <= 0) return entries.length === 1 && entries[0] === "https";
  return entries[Math.max(0, entries.length - trustedProxies)] === "https";
}
