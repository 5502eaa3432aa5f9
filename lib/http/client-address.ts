import type { HeaderSource } from "./answer";

/**
 * The client's address as the trusted reverse proxies in front of the server report it, or null
 * when none is configured (IDEMGATE_TRUSTED_PROXY unset or 0): without one, X-Forwarded-For is
 * whatever the client wrote. With `trustedProxies` = n, each of the n proxies appends the address it
 * saw to X-Forwarded-For, so the client is the n-th entry from the right; entries further left
 * were written by the client and are ignored. A request with fewer entries did not come through
 * the proxies, and counts under the one address "unknown".
 */
export function clientAddress(headers: HeaderSource, trustedProxies: number): string | null {
  if (trustedProxies <= 0) return null;
  const hops = (headers.get("x-forwarded-for") ?? "")
    .split(",")
    .map((hop) => hop.trim())
    .filter((hop) => hop !== "");
  if (hops.length < trustedProxies) return "unknown";
  return hops[hops.length - trustedProxies].toLowerCase();
}
