import type { HeaderSource } from "./answer";
import { servedOverHttps } from "./served-over-https";

/**
 * The origin (scheme, host and port) the browser reached the server at, or null when the request
 * does not name one.
 *
 * Without a trusted proxy (IDEMGATE_TRUSTED_PROXY unset or 0): the Host header and the scheme of the
 * server's own connection (X-Forwarded-Proto as scripts/serve.mjs sets it, see servedOverHttps); an
 * X-Forwarded-Host is whatever the client wrote and is ignored. With `trustedProxies` = n: the host
 * and scheme the outermost proxy reports (the n-th X-Forwarded-Host entry from the right when each
 * appends to it, or the only one when they replace it), or the Host header when no proxy sent one.
 */
export function requestOrigin(headers: HeaderSource, trustedProxies: number): string | null {
  const host = (trustedProxies > 0 ? forwardedHost(headers, trustedProxies) : null) ?? headers.get("host")?.trim();
  if (!host) return null;
  const scheme = servedOverHttps(headers, trustedProxies) ? "https" : "http";
  let url: URL;
  try {
    url = new URL(`${scheme}://${host}`);
  } catch {
    return null;
  }
  // a host value that carries more than host[:port] (a path, credentials, a query) names no origin
  if (url.pathname !== "/" || url.username || url.password || url.search || url.hash || host.includes("/")) return null;
  return url.origin;
}

function forwardedHost(headers: HeaderSource, trustedProxies: number): string | null {
  const entries = (headers.get("x-forwarded-host") ?? "")
    .split(",")
    .map((entry) => entry.trim())
    .filter((entry) => entry !== "");
  if (entries.length === 0) return null;
  return entries[Math.max(0, entries.length - trustedProxies)];
}

/**
 * Whether an Origin header names exactly `expected` (scheme, host and port; a browser's
 * `Origin: null` never does).
 */
export function originMatches(origin: string | null, expected: string | null): boolean {
  if (!origin || !expected) return false;
  try {
    const url = new URL(origin);
    return url.origin !== "null" && url.origin === expected;
  } catch {
    return false;
  }
}
