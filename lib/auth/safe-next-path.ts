/** A base no request is ever served from: only what resolves under it, and stays there, is a path of this site. */
const BASE = "http://idemgate.invalid";

/** What `reference` names on this site (path, query, fragment) as a browser resolves it, or null when it names another. */
function pathOnThisSite(reference: string): string | null {
  const url = new URL(reference, BASE);
  return url.origin === BASE ? url.pathname + url.search + url.hash : null;
}

/**
 * Where to go after signing in: only a path on this site. `next` is resolved with the WHATWG URL
 * parser, as the browser will resolve it (backslashes, tabs and newlines, dot-segments, encoded
 * dots), and what it resolves to must be on this site twice over: as `next` and as the path
 * answered, which the browser resolves again when it follows the redirect ("/.//evil.example"
 * resolves to the path "//evil.example", which would leave). Anything else, and the sign-in page
 * itself, falls back to the overview.
 */
export function safeNextPath(next: unknown, fallback = "/"): string {
  if (typeof next !== "string" || !next.startsWith("/") || next.length > 2_000) return fallback;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(next)) return fallback;
  try {
    const path = pathOnThisSite(next);
    if (path === null || pathOnThisSite(path) !== path) return fallback;
    if (new URL(path, BASE).pathname === "/login") return fallback;
    return path;
  } catch {
    return fallback;
  }
}
