import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { matchRoute } from "./fast-invoke";
import { GATEWAY_ROUTES, paramName } from "./routes";

const ROOT = path.resolve(import.meta.dirname, "../..");

/** The App Router file of a route: `/api/v1/tools/{tool}/invoke` → app/api/v1/tools/[tool]/invoke/route.ts */
const routeFile = (p: string) => path.join(ROOT, "app", p.replace(/\{(\w+)\}/g, "[$1]"), "route.ts");

/** Whether the fast path takes a request. */
const taken = (method: string, url: string) => matchRoute(method, url) !== null;

describe("the gateway's routes", () => {
  it.each(Object.entries(GATEWAY_ROUTES))("%s has an App Router file that dispatches through the table, and nothing else", (name, route) => {
    const file = routeFile(route.path);
    expect(existsSync(file), `${path.relative(ROOT, file)} exists`).toBe(true);
    const text = readFileSync(file, "utf8");
    expect(text).toContain(`export const ${route.method} = appRoute(${JSON.stringify(name)});`);
    // one handler per route file: the table's
    expect(text.match(/export const (GET|POST|PUT|PATCH|DELETE)\b/g)).toEqual([`export const ${route.method}`]);
    expect(paramName(route) === null).toBe(!route.path.includes("{"));
  });

  it("are, for their POSTs, the routes the fast path takes, with or without a query; a GET is left to Next.js", () => {
    for (const route of Object.values(GATEWAY_ROUTES)) {
      const url = route.path.replace(/\{\w+\}/, "a.b");
      expect(taken(route.method, url), `${route.method} ${url}`).toBe(route.method === "POST");
      expect(taken(route.method, `${url}?limit=5`), `${route.method} ${url}?limit=5`).toBe(route.method === "POST");
      expect(taken(route.method === "GET" ? "POST" : "GET", url), `other method: ${url}`).toBe(false);
      expect(taken(route.method, `${url}/more`), `${url}/more`).toBe(false);
    }
    expect(taken("HEAD", "/api/v1/tools/a.b/held")).toBe(false);
    expect(taken("POST", "/api/v1/tools/a%2/invoke")).toBe(false); // not valid percent-encoding: left to Next.js
    expect(taken("POST", "/api/v1/keys")).toBe(false);
    expect(matchRoute("POST", "/api/v1/tools/pay%2Ecard/invoke")).toMatchObject({ handler: GATEWAY_ROUTES.invoke.handle, segment: "pay.card" });
    expect(matchRoute("POST", "/api/v1/replays?x=1")).toMatchObject({ handler: GATEWAY_ROUTES.replays.handle, segment: "" });
    expect(taken("GET", "/api/v1/tools")).toBe(false);
  });
});
