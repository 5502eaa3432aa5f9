import { withApiToken } from "@/lib/auth/token-guard";
import { toResponse } from "@/lib/http/answer";
import { gatewayRequest } from "./gateway-request";
import { GATEWAY_ROUTES, paramName, type GatewayRouteName } from "./routes";

/**
 * The App Router handler of a gateway route (routes.ts): the API token checked, then the route's
 * handler, as the fast path calls it. Next.js hands the path parameter over decoded once.
 */
export function appRoute(name: GatewayRouteName) {
  const route = GATEWAY_ROUTES[name];
  const param = paramName(route);
  return withApiToken<Record<string, string>>(async (request, { params, principal, runtime }) =>
    toResponse(await route.handle(gatewayRequest(request), param === null ? "" : params[param], principal, runtime)),
  );
}
