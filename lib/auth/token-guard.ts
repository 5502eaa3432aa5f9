import { authenticateToken, cachedPrincipal, type TokenPrincipal } from "@/lib/auth/api-tokens";
import { getRuntime, type Runtime } from "@/lib/server/runtime";
import type { HeaderSource } from "@/lib/http/answer";
import { errorResponse, unauthorized } from "@/lib/http/problem";

// API-token authentication on its own, without the console's cookie sessions: the gateway's
// node:http fast path (lib/gateway/fast-invoke.ts) runs outside the App Router and uses only this.

export function bearerToken(headers: HeaderSource): string | null {
  const header = headers.get("authorization");
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1] : null;
}

const UNKNOWN_TOKEN = "the API token is unknown or revoked";

/**
 * The caller's principal when this process knows its token (looked up within TOKEN_CACHE_MS),
 * without I/O; undefined when it must be looked up (tokenPrincipal). Throws the same 401s.
 */
export function knownPrincipal(headers: HeaderSource): TokenPrincipal | undefined {
  const token = bearerToken(headers);
  if (!token) throw unauthorized();
  const principal = cachedPrincipal(token);
  if (principal === null) throw unauthorized(UNKNOWN_TOKEN);
  return principal ?? undefined;
}

export async function tokenPrincipal(headers: HeaderSource, runtime: Runtime): Promise<TokenPrincipal> {
  const token = bearerToken(headers);
  if (!token) throw unauthorized();
  const principal = await authenticateToken(runtime.db.prisma, token);
  if (!principal) throw unauthorized(UNKNOWN_TOKEN);
  return principal;
}

export type Handler<C> = (request: Request, context: C & { runtime: Runtime }) => Promise<Response>;

/** For the gateway: the caller must present an API token; its scope is the only one it sees. */
export function withApiToken<P>(handler: Handler<{ params: P; principal: TokenPrincipal }>) {
  return async (request: Request, ctx: { params: Promise<P> }): Promise<Response> => {
    try {
      const runtime = await getRuntime();
      const principal = await tokenPrincipal(request.headers, runtime);
      return await handler(request, { params: await ctx.params, principal, runtime });
    } catch (err) {
      return errorResponse(err, new URL(request.url).pathname);
    }
  };
}

