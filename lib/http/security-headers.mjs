// The headers every answer carries (lib/http/security-headers.ts says why). Plain JavaScript so that
// scripts/serve.mjs, which runs without a TypeScript loader, reads the same list.
export const SECURITY_HEADERS = Object.freeze({
  "X-Frame-Options": "DENY",
  "Content-Security-Policy": "frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "strict-origin-when-cross-origin",
});
