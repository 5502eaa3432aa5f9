import "server-only";
import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import type { OperatorIdentity } from "@/lib/auth/roles";
import { can, type Permission } from "@/lib/auth/roles";
import { currentOperator } from "@/lib/auth/session";
import { getRuntime, type Runtime } from "@/lib/server/runtime";
import { badRequest, errorResponse, forbidden, unauthorized } from "@/lib/http/problem";
import { originMatches, requestOrigin } from "@/lib/http/request-origin";
import { metricsBearerAllowed } from "./metrics-access";
import { cliActorFrom, CLI_ACTOR_HEADER, isCliToken, verifyCliToken } from "./cli-access";
import { bearerToken, tokenPrincipal, type Handler } from "./token-guard";

/**
 * Who is asking: a tenant's API token (one scope), a signed-in operator (every scope), or the
 * command line on this machine reaching the embedded database through its server (lib/auth/cli-access.ts).
 */
export type Principal =
  | { kind: "token"; token: TokenPrincipal }
  | { kind: "operator"; operator: OperatorIdentity }
  | { kind: "cli"; actor: string };

/** What the command line may do through a running server: manage API tokens, pause and resume tools. */
const CLI_PERMISSIONS: readonly Permission[] = ["manage_tokens", "pause_tools"];

/**
 * Cookie-authenticated mutations must come from the console's own pages. Browsers send Origin with
 * every POST; a cross-site form or fetch carries the session cookie but not a matching Origin. The
 * whole origin counts (scheme, host and port), and forwarded headers only from trusted proxies
 * (requestOrigin).
 */
export function assertSameOrigin(request: Request, trustedProxies: number): void {
  if (!originMatches(request.headers.get("origin"), requestOrigin(request.headers, trustedProxies))) {
    throw forbidden("cross-site requests are refused: the Origin must be this console");
  }
}

/**
 * For admin routes: a signed-in operator with the permission (mutations also same-origin), or,
 * for reads, an API token limited to its own scope.
 */
export function withPrincipal<P>(permission: Permission, handler: Handler<{ params: P; principal: Principal }>) {
  return async (request: Request, ctx: { params: Promise<P> }): Promise<Response> => {
    try {
      const runtime = await getRuntime();
      let principal: Principal;
      const bearer = bearerToken(request.headers);
      if (bearer && isCliToken(bearer)) {
        principal = cliPrincipal(request, bearer, permission);
      } else if (bearer) {
        if (permission !== "read") throw forbidden("API tokens may read their own scope; this needs an operator");
        principal = { kind: "token", token: await tokenPrincipal(request.headers, runtime) };
      } else {
        principal = { kind: "operator", operator: await sessionOperator(request, runtime, permission, "an API token") };
      }
      return await handler(request, { params: await ctx.params, principal, runtime });
    } catch (err) {
      return errorResponse(err, new URL(request.url).pathname);
    }
  };
}

/**
 * For /api/metrics, whose figures span every tenant: the deployment's metrics token
 * (metricsBearerAllowed: a tenant's API token gets 403) or a signed-in operator who may read.
 */
export function withMetricsReader(handler: Handler<object>) {
  return async (request: Request): Promise<Response> => {
    try {
      const runtime = await getRuntime();
      if (!(await metricsBearerAllowed(request.headers, runtime))) {
        await sessionOperator(request, runtime, "read", "the metrics token (IDEMGATE_METRICS_TOKEN) as a bearer token");
      }
      return await handler(request, { runtime });
    } catch (err) {
      return errorResponse(err, new URL(request.url).pathname);
    }
  };
}

/** The command line's principal: this server's CLI credential, for what the CLI may do through it. */
function cliPrincipal(request: Request, bearer: string, permission: Permission): Principal {
  if (!verifyCliToken(bearer)) throw unauthorized("the command-line credential is not this server's (it changes at every start: run the command again)");
  if (!CLI_PERMISSIONS.includes(permission)) throw forbidden("the command line may only manage API tokens and pause or resume tools through the server");
  const actor = cliActorFrom(request.headers.get(CLI_ACTOR_HEADER));
  if (!actor) throw badRequest("invalid_header", `send the command line's actor as ${CLI_ACTOR_HEADER}: cli:<user>@<host>`);
  return { kind: "cli", actor };
}

/** The signed-in operator, if their role has the permission (mutations also same-origin); `orElse` names the other way in for the 401. */
async function sessionOperator(request: Request, runtime: Runtime, permission: Permission, orElse: string): Promise<OperatorIdentity> {
  const operator = await currentOperator();
  if (!operator) throw unauthorized(`sign in to the console, or send ${orElse}`);
  if (!can(operator.role, permission)) throw forbidden(`the ${operator.role} role may not ${permission.replace("_", " ")}`);
  if (request.method !== "GET" && request.method !== "HEAD") assertSameOrigin(request, runtime.config.trustedProxies);
  return operator;
}

/** The scope a principal may see: a token's own, or whatever an operator asked for. */
export function visibleScope(principal: Principal, requested: string | null | undefined): string | undefined {
  if (principal.kind === "token") {
    if (requested && requested !== principal.token.scope) throw forbidden("this API token may only see its own scope");
    return principal.token.scope;
  }
  return requested ?? undefined;
}

/** The signed-in operator behind a route of the console's own (withPrincipal lets API tokens in for "read" only). */
export function operatorOf(principal: Principal): OperatorIdentity {
  if (principal.kind !== "operator") throw forbidden("this route is the console's own: sign in as an operator");
  return principal.operator;
}
