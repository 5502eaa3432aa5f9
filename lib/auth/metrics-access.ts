import { createHash, timingSafeEqual } from "node:crypto";
import type { HeaderSource } from "@/lib/http/answer";
import { forbidden } from "@/lib/http/problem";
import type { Runtime } from "@/lib/server/runtime";
import { bearerToken, tokenPrincipal } from "./token-guard";

const digest = (text: string) => createHash("sha256").update(text).digest();

/**
 * /api/metrics spans every tenant (keys by state, open anomalies, calls per tool), so a tenant's API
 * token may not read it: Prometheus scrapes with the deployment's metrics token
 * (IDEMGATE_METRICS_TOKEN), people read it signed in to the console. Returns true when the request
 * carries the metrics token, false when it carries no bearer token (the caller then asks for a
 * session); an API token is refused with 403, anything else with 401.
 */
export async function metricsBearerAllowed(headers: HeaderSource, runtime: Runtime): Promise<boolean> {
  const bearer = bearerToken(headers);
  if (bearer === null) return false;
  const expected = runtime.config.metricsToken;
  // compared as digests: equal lengths, and no early exit on the first differing byte
  if (expected !== null && timingSafeEqual(digest(bearer), digest(expected))) return true;
  // an unknown or revoked token: 401 from here
  await tokenPrincipal(headers, runtime);
  throw forbidden(
    "an API token belongs to one tenant and /api/metrics shows figures of every tenant: scrape it with the deployment's metrics token (IDEMGATE_METRICS_TOKEN), or sign in to the console",
  );
}
