import type { TokenPrincipal } from "@/lib/auth/api-tokens";
import type { HttpAnswer } from "@/lib/http/answer";
import type { Runtime } from "@/lib/server/runtime";
import type { GatewayRequest } from "./gateway-request";
import { invokeTool } from "./invoke-tool";
import { answerProbe, claimProbe, listHeldCalls } from "./probes";
import { recordClientReplays } from "./record-client-replays";
import { reserveTool, settleExecution } from "./reservations";

/** A gateway route's handler: the request, its one path parameter decoded ("" for none), the API token's principal. */
export type GatewayHandler = (request: GatewayRequest, segment: string, principal: TokenPrincipal, runtime: Runtime) => Promise<HttpAnswer>;

export interface GatewayRoute {
  method: "GET" | "POST";
  /** the path, with `{name}` for its one parameter at most */
  path: string;
  handle: GatewayHandler;
}

/**
 * The gateway's routes for API-token callers, each in one place: the node:http fast path
 * (fast-invoke.ts) serves the POSTs of this table, and each route's App Router file
 * (app/api/v1/…/route.ts) is `export const POST = appRoute("<name>")` (app-route.ts). A new route is
 * an entry here and that one-line route file; routes.test.ts checks that the two agree.
 */
export const GATEWAY_ROUTES = {
  invoke: { method: "POST", path: "/api/v1/tools/{tool}/invoke", handle: invokeTool },
  reserve: { method: "POST", path: "/api/v1/tools/{tool}/reservations", handle: reserveTool },
  complete: { method: "POST", path: "/api/v1/executions/{executionId}/complete", handle: (r, id, p, rt) => settleExecution(r, id, "complete", p, rt) },
  release: { method: "POST", path: "/api/v1/executions/{executionId}/release", handle: (r, id, p, rt) => settleExecution(r, id, "release", p, rt) },
  heartbeat: { method: "POST", path: "/api/v1/executions/{executionId}/heartbeat", handle: (r, id, p, rt) => settleExecution(r, id, "heartbeat", p, rt) },
  replays: { method: "POST", path: "/api/v1/replays", handle: recordClientReplays },
  held: { method: "GET", path: "/api/v1/tools/{tool}/held", handle: listHeldCalls },
  probeClaim: { method: "POST", path: "/api/v1/executions/{executionId}/probe/claim", handle: claimProbe },
  probeAnswer: { method: "POST", path: "/api/v1/executions/{executionId}/probe/answer", handle: answerProbe },
} satisfies Record<string, GatewayRoute>;

export type GatewayRouteName = keyof typeof GATEWAY_ROUTES;

/** The name of a route's path parameter (`tool` for `/api/v1/tools/{tool}/invoke`), null for none. */
export function paramName(route: GatewayRoute): string | null {
  return /\{(\w+)\}/.exec(route.path)?.[1] ?? null;
}
