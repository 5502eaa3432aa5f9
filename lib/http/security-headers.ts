/**
 * Sent with every answer: console pages, API answers, the gateway's fast path. No page may be framed
 * (a framing page could lure an operator into clicking "Release all"), no body is sniffed into
 * another type, and a link out names this site's origin only. Not `no-referrer`: browsers then send
 * `Origin: null` with the console's own POSTs, which the same-origin check refuses.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  "X-Frame-Options": "DENY",
  "Content-Security-Policy": "frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "strict-origin-when-cross-origin",
});

const holder = globalThis as unknown as { __idemgateSecurityHeaders?: Readonly<Record<string, string>> };

/** Hands them to the server process: scripts/serve.mjs sets them on every request it passes to Next.js. */
export function registerSecurityHeaders(): void {
  holder.__idemgateSecurityHeaders = SECURITY_HEADERS;
}
