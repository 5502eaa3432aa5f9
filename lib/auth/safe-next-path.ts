/**
 * Where to go after signing in: only a path on this site. Anything that could leave it
 * ("//evil.example", "https://…", "/\\evil", control characters) falls back to the overview.
 */
export function safeNextPath(next: unknown, fallback = "/"): string {
  if (typeof next !== "string" || next.length === 0 || next.length > 2_000) return fallback;
  if (!next.startsWith("/") || next.startsWith("//") || next.startsWith("/\\")) return fallback;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f\\]/.test(next)) return fallback;
  try {
    const url = new URL(next, "http://idemgate.invalid");
    if (url.origin !== "http://idemgate.invalid") return fallback;
    if (url.pathname === "/login") return fallback;
    return url.pathname + url.search + url.hash;
  } catch {
    return fallback;
  }
}
