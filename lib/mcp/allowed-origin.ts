import { localhostAllowedHostnames, validateHostHeader } from "@modelcontextprotocol/server";
import type { HeaderSource } from "@/lib/http/answer";
import { originMatches, requestOrigin } from "@/lib/http/request-origin";

/** What decides which browsers may call /mcp. */
export interface McpOriginPolicy {
  /** IDEMGATE_TRUSTED_PROXY: whose X-Forwarded-Host and -Proto name the server's own origin */
  trustedProxies: number;
  /** IDEMGATE_MCP_ALLOWED_ORIGINS: exact origins besides the server's own */
  allowedOrigins: readonly string[];
  /** the server listens on a loopback address only (lib/server/listening-address.ts) */
  loopbackOnly: boolean;
}

/**
 * Why /mcp refuses this request as one a web page may have sent (DNS rebinding, a cross-site
 * form or fetch), or null when it may proceed. The MCP transport's specification requires servers
 * to validate Origin; the bearer token alone would otherwise be all that keeps such a page out.
 *
 * - Host: on a server that listens on loopback only, with no trusted proxy in front, the Host must
 *   be a loopback name (localhost, 127.0.0.1, [::1]) or the host of an allowed origin. A page on
 *   evil.example whose name was rebound to 127.0.0.1 sends `Host: evil.example` — and an Origin that
 *   equals the "own" origin that Host makes, so the Origin check alone would let it in. A server on
 *   every interface does not know the names it is reached by (nor does one behind a proxy, which
 *   decides which names reach it), so it leaves Host alone, as the MCP SDKs do.
 * - Origin, when present: exactly the server's own origin as the console computes it (Host, or the
 *   trusted proxy's forwarded host; lib/http/request-origin.ts) or one of the allowed origins. A
 *   request without Origin is not from a browser (the SDKs, the stdio bridge, curl) and passes;
 *   `Origin: null` and anything that is not an origin are refused.
 */
export function mcpOriginRefusal(headers: HeaderSource, policy: McpOriginPolicy): string | null {
  const own = requestOrigin(headers, policy.trustedProxies);
  if (policy.loopbackOnly && policy.trustedProxies === 0) {
    const allowedHosts = [...localhostAllowedHostnames(), ...policy.allowedOrigins.map((o) => new URL(o).hostname)];
    const host = validateHostHeader(headers.get("host"), allowedHosts);
    if (!host.ok) return `${host.message}: this server listens on loopback only and answers MCP requests addressed to localhost (or to the host of an origin in IDEMGATE_MCP_ALLOWED_ORIGINS)`;
  }
  const origin = headers.get("origin");
  if (origin === null || origin === "") return null;
  if (originMatches(origin, own) || policy.allowedOrigins.some((allowed) => originMatches(origin, allowed))) return null;
  return `Origin ${JSON.stringify(origin)} may not call this MCP endpoint: only the server's own origin${own ? ` (${own})` : ""} and those in IDEMGATE_MCP_ALLOWED_ORIGINS may`;
}
