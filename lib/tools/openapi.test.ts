import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { GET as openApiRoute } from "@/app/api/v1/openapi.json/route";
import { POST as invokeRoute } from "@/app/api/v1/tools/[tool]/invoke/route";
import { createApiToken } from "@/lib/auth/api-tokens";
import { PROBLEM_CODES } from "@/lib/http/problem";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { defineTool } from "./define-tool";
import { OPERATION_PROBLEMS, type OpenApiDocument } from "./openapi";
import { ToolRegistry } from "./registry";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { installTestRuntime } from "@/test/support/runtime";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The document's response for this operation and status, references resolved. */
function documented(doc: OpenApiDocument, tool: string, status: number): Json | undefined {
  const responses = (doc.paths[`/api/v1/tools/${tool}/invoke`].post as Json).responses as Json;
  const response = responses[String(status)] as Json | undefined;
  if (!response?.$ref) return response;
  return (doc.components as Json).responses[String(response.$ref).split("/").pop()!];
}

/**
 * The gateway's answer must be one the document states: its status is listed for the operation, that
 * status's description names the answer's problem type, and every header the document states for
 * that type is sent with exactly the value the document gives.
 */
async function expectDocumented(doc: OpenApiDocument, tool: string, res: Response) {
  const body = (await res.json()) as Json;
  const code = String(body.type).replace("/problems/", "");
  const response = documented(doc, tool, res.status);
  expect(response, `${tool}: ${res.status} ${code} is not in the document`).toBeDefined();
  expect(response!.description).toContain(`/problems/${code}`);
  for (const [name, header] of Object.entries((response!.headers ?? {}) as Json)) {
    const sent = res.headers.get(name);
    expect(sent, `${name} with ${res.status}`).not.toBeNull();
    expect(header.schema.type === "integer" ? Number(sent) : sent).toBe(header.schema.const);
  }
  return { code, body };
}

describe("the API reference states what the gateway answers", () => {
  let pg: TestPostgres;
  let runtime: Runtime;
  let token: string;
  let doc: OpenApiDocument;
  let release: () => void = () => {};
  let started: () => void = () => {};

  beforeAll(async () => {
    pg = await createTestPostgres("openapi_drift");
    const registry = new ToolRegistry([
      defineTool({
        name: "ledger.hold",
        kind: "write",
        description: "answers once the test lets it",
        schema: z.object({ n: z.number().int() }),
        run: async () => {
          started();
          await new Promise<void>((resolve) => (release = resolve));
          return { body: { held: true } };
        },
      }),
    ]);
    runtime = installTestRuntime({ db: pg.db, store: new SqlKeyStore(pg.db), registry });
    token = (await createApiToken(pg.db.prisma, { scope: "tenant-openapi", actor: "test" })).token;
    doc = registry.openApiDocument("http://idemgate.test");
  });

  afterAll(async () => {
    release();
    await runtime?.close();
    await pg?.drop();
  });

  const call = (body: unknown, headers: Record<string, string> = {}) =>
    invokeRoute(
      new Request("http://idemgate.test/api/v1/tools/ledger.hold/invoke", {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}`, ...headers },
        body: JSON.stringify(body),
      }),
      { params: Promise.resolve({ tool: "ledger.hold" }) },
    );

  it("for a running call's duplicate (409 with Retry-After), a missing key, a bad token and a reused key", async () => {
    const running = new Promise<void>((resolve) => (started = resolve));
    const first = call({ n: 1 }, { "Idempotency-Key": "drift-1" });
    await running;

    const duplicate = await call({ n: 1 }, { "Idempotency-Key": "drift-1" });
    expect(duplicate.status).toBe(409);
    expect((await expectDocumented(doc, "ledger.hold", duplicate)).code).toBe("conflict");
    // the document states the value itself, and it is the one the gateway sent
    expect(documented(doc, "ledger.hold", 409)!.headers["Retry-After"].schema.const).toBe(Number(duplicate.headers.get("retry-after")));

    release();
    expect((await first).status).toBe(200);

    const reused = await call({ n: 2 }, { "Idempotency-Key": "drift-1" });
    expect((await expectDocumented(doc, "ledger.hold", reused)).code).toBe("mismatch");

    const keyless = await call({ n: 3 });
    expect((await expectDocumented(doc, "ledger.hold", keyless)).code).toBe("missing_key");

    const anonymous = await call({ n: 1 }, { "Idempotency-Key": "drift-2", Authorization: "Bearer nope" });
    expect((await expectDocumented(doc, "ledger.hold", anonymous)).code).toBe("unauthorized");

    const invalid = await call({ n: "one" }, { "Idempotency-Key": "drift-3" });
    expect((await expectDocumented(doc, "ledger.hold", invalid)).code).toBe("invalid_arguments");
  });

  it("GET /api/v1/openapi.json renders the served tools once per tool set, again when the set changes", async () => {
    const rendered: string[] = [];
    class CountingRegistry extends ToolRegistry {
      override describe(tool: Parameters<ToolRegistry["describe"]>[0]) {
        rendered.push(tool.name);
        return super.describe(tool);
      }
    }
    const tool = (name: string) => defineTool({ name, kind: "write", description: name, schema: z.object({ n: z.number() }), run: async () => ({ body: {} }) });
    const before = runtime.registry;
    try {
      runtime.registry = new CountingRegistry([tool("ledger.one")]);
      const get = async () => {
        const res = await openApiRoute(new Request("http://idemgate.test/api/v1/openapi.json"));
        expect(res.status).toBe(200);
        expect(res.headers.get("content-type")).toBe("application/json");
        return (await res.json()) as OpenApiDocument;
      };
      const first = await get();
      const second = await get();
      expect(Object.keys(first.paths)).toContain("/api/v1/tools/ledger.one/invoke");
      expect(second).toEqual(first);
      expect(rendered).toEqual(["ledger.one"]);
      // a reload (or an MCP server's changed list) swaps the registry: the new set is what is served
      runtime.registry = new CountingRegistry([tool("ledger.one"), tool("ledger.two")]);
      const third = await get();
      expect(Object.keys(third.paths)).toContain("/api/v1/tools/ledger.two/invoke");
      expect(rendered).toEqual(["ledger.one", "ledger.one", "ledger.two"]);
    } finally {
      runtime.registry = before;
    }
  });

  it("names only problem types that have a page, and every status of each", () => {
    for (const codes of Object.values(OPERATION_PROBLEMS)) for (const code of codes) expect(PROBLEM_CODES).toContain(code);
    // outcome_unknown: 409 for a retry of the key, 502 for the call, 504 after a timeout
    for (const status of [409, 502, 504]) expect(documented(doc, "ledger.hold", status)?.description).toContain("/problems/outcome_unknown");
  });
});
