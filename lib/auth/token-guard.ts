import { authenticateToken, type TokenPrincipal } from "@/lib/auth/api-tokens";
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

export async function tokenPrincipal(headers: HeaderSource, runtime: Runtime): Promise<TokenPrincipal> {
  const token = bearerToken(headers);
  if (!token) throw unauthorized();
  const principal = await authenticateToken(runtime.db.prisma, token);
  if (!principal) throw unauthorized("the API token is unknown or revoked");
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

