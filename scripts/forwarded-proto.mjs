// Used by scripts/serve.mjs before a request reaches Next.js or the gateway's fast path.

/** IDEMGATE_TRUSTED_PROXY as a count (lib/server/config.ts validates it at start and refuses a bad value). */
export function trustedProxyCount(env = process.env) {
  const n = Number(env.IDEMGATE_TRUSTED_PROXY?.trim() || 0);
  return Number.isInteger(n) && n > 0 ? n : 0;
}

/**
 * Without a trusted proxy in front, X-Forwarded-Proto and X-Forwarded-Host are whatever the client
 * wrote (Next.js keeps a header it finds): replace the scheme with that of this connection, so the
 * app can tell from it whether the browser used HTTPS (lib/http/served-over-https.ts), and drop the
 * host (lib/http/request-origin.ts). With trusted proxies the headers are theirs and stay.
 */
export function setForwardedProto(req, trustedProxies) {
  if (trustedProxies > 0) return;
  req.headers["x-forwarded-proto"] = req.socket.encrypted ? "https" : "http";
  // likewise X-Forwarded-Host: Next.js keeps a client's and compares a server action's Origin with
  // it; without it, it takes Host, the host the browser asked
  delete req.headers["x-forwarded-host"];
}
