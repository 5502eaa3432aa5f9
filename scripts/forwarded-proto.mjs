// Used by scripts/serve.mjs before a request reaches Next.js or the gateway's fast path.

/** IDEMGATE_TRUSTED_PROXY as a count (lib/server/config.ts validates it at start and refuses a bad value). */
export function trustedProxyCount(env = process.env) {
  const n = Number(env.IDEMGATE_TRUSTED_PROXY?.trim() || 0);
  return Number.isInteger(n) && n > 0 ? n : 0;
}

/**
 * Without a trusted proxy in front, X-Forwarded-Proto is whatever the client wrote (Next.js keeps a
 * header it finds): replace it with the scheme of this connection, so the app can tell from it
 * whether the browser used HTTPS (lib/http/served-over-https.ts). With trusted proxies the header is
 * theirs and stays.
 */
export function setForwardedProto(req, trustedProxies) {
  if (trustedProxies > 0) return;
  req.headers["x-forwarded-proto"] = req.socket.encrypted ? "https" : "http";
}
