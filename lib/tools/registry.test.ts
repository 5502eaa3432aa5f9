import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { InvalidArgumentsError, UnknownToolError } from "@/lib/idempotency/errors";
import { DEFAULT_POLICY } from "@/lib/idempotency/tool";
import { defineTool, defineTools, ToolDefinitionError } from "./define-tool";
import { demoTools } from "./demo";
import { getRegistry } from "./index";
import { derivedKey } from "./upstream";
import { ToolRegistry } from "./registry";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";

const DEMO_NAMES = [
  "payments.charge",
  "payments.refund",
  "payments.list_charges",
  "payments.get_balance",
  "email.send",
  "email.list_outbox",
  "tickets.create",
  "tickets.list",
  "ledger.record",
];

const echo = defineTool({
  name: "test.echo",
  kind: "write",
  description: "echo",
  schema: z.strictObject({ text: z.string(), tags: z.array(z.string().min(1)).optional() }),
  async run(args, ctx) {
    return { status: 201, body: { text: args.text, scope: ctx.scope, key: ctx.key, hasDb: typeof ctx.db.demoTicket.count === "function" } };
  },
});

function caught(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error("expected a throw");
}

describe("defineTool", () => {
  it("applies the default policy", () => {
    expect(echo).toMatchObject({
      ttlMs: DEFAULT_POLICY.ttlMs,
      leaseMs: 60_000,
      stuckPolicy: "block",
      fallbackTtlMs: null,
    });
    expect(echo.ttlMs).toBe(24 * 60 * 60 * 1000);
  });

  it("fallbackDedupe: true is the default 60 s window; { ttlMs } sets it", () => {
    const base = { kind: "write" as const, description: "d", schema: z.object({}), run: async () => ({ body: null }) };
    expect(defineTool({ ...base, name: "a.b", fallbackDedupe: true }).fallbackTtlMs).toBe(60_000);
    expect(defineTool({ ...base, name: "a.b", fallbackDedupe: { ttlMs: 5_000 } }).fallbackTtlMs).toBe(5_000);
    expect(defineTool({ ...base, name: "a.b", fallbackDedupe: false }).fallbackTtlMs).toBeNull();
  });

  it("refuses bad names, both or neither of run/upstream, bad durations, fallback on reads, duplicates", () => {
    const base = { kind: "write" as const, description: "d", schema: z.object({}), run: async () => ({ body: null }) };
    for (const name of ["Payments.charge", "payments..charge", "payments.charge.", "1pay", "pay-ments", "payments/charge", ""]) {
      expect(caught(() => defineTool({ ...base, name }))).toBeInstanceOf(ToolDefinitionError);
    }
    expect(() => defineTool({ ...base, name: "crm.contacts.upsert_v2" })).not.toThrow();
    expect(() => defineTool({ kind: "write", description: "d", schema: z.object({}), name: "x" } as never)).toThrow(/exactly one of run/);
    expect(() => defineTool({ ...base, name: "x", upstream: { url: "http://x", timeoutMs: 1 } } as never)).toThrow(/exactly one of run/);
    // a tool run by its caller has neither run nor upstream, and is a write
    expect(() => defineTool({ ...base, name: "x", runs: "client" } as never)).toThrow(/exactly one of run/);
    expect(() => defineTool({ ...base, run: undefined, name: "x", runs: "server" } as never)).toThrow(/runs must be "client"/);
    expect(() => defineTool({ ...base, run: undefined, name: "x", kind: "read", runs: "client" })).toThrow(/for write tools/);
    expect(defineTool({ ...base, run: undefined, name: "x", runs: "client" })).toMatchObject({ runs: "client", leaseMs: 60_000 });
    expect(() => defineTool({ ...base, run: undefined, name: "x", upstream: { url: "not a url", timeoutMs: 1_000 } })).toThrow(/not a URL/);
    expect(() => defineTool({ ...base, name: "x", leaseMs: 0 })).toThrow(/leaseMs/);
    expect(() => defineTool({ ...base, name: "x", ttlMs: 1.5 })).toThrow(/ttlMs/);
    expect(() => defineTool({ ...base, name: "x", kind: "read", fallbackDedupe: true })).toThrow(/write tools/);
    expect(() => defineTool({ ...base, name: "x", kind: "read", dedupes: true })).toThrow(/write tools/);
    // a call still waiting for its service must never look stuck
    expect(() => defineTool({ ...base, run: undefined, name: "x", leaseMs: 5_000, upstream: { url: "http://x", timeoutMs: 5_000 } })).toThrow(/below the lease/);
    // the engine runs a call only while the rest of its lease covers this bound
    expect(defineTool({ ...base, run: undefined, name: "x", leaseMs: 5_000, upstream: { url: "http://x", timeoutMs: 4_000 } }).runTimeoutMs).toBe(4_000);
    expect(() => defineTool({ ...base, name: "x", leaseMs: 5_000, runTimeoutMs: 5_000 })).toThrow(/runTimeoutMs \(5000\) must be below the lease/);
    // within the lease's margin it could never start: refused at start, not on every call
    expect(() => defineTool({ ...base, run: undefined, name: "x", leaseMs: 10_500, upstream: { url: "http://x", timeoutMs: 10_000 } })).toThrow(
      /upstream\.timeoutMs \(10000\) must be below the lease \(10500 ms\) by more than 1000 ms/,
    );
    expect(() => defineTool({ ...base, run: undefined, name: "x", upstream: { url: "http://x", timeoutMs: 1_000, statusUrl: "nope" } })).toThrow(/statusUrl/);
    expect(() => defineTools([echo, echo])).toThrow(/defined twice/);
  });
});

describe("ToolRegistry lookup", () => {
  const registry = new ToolRegistry([...demoTools, echo]);

  it("lists the tools in configuration order and finds them by name", () => {
    expect(registry.list().map((t) => t.name)).toEqual([...DEMO_NAMES, "test.echo"]);
    expect(registry.get("payments.charge").kind).toBe("write");
    expect(registry.has("payments.charge")).toBe(true);
    expect(registry.has("nope")).toBe(false);
    expect(caught(() => registry.get("payments.teleport"))).toBeInstanceOf(UnknownToolError);
  });

  it("a tool run by its caller has no runner: invoking it is a 400 naming how it runs", () => {
    const ledger = registry.get("ledger.record");
    expect(registry.describe(ledger).source).toBe("client");
    const err = caught(() => registry.runnerFor(ledger, {} as never));
    expect(err).toMatchObject({ code: "runs_in_client" });
    expect(String((err as Error).message)).toMatch(/runs in its caller's own process/);
  });

  it("getRegistry() serves lib/tools/config.ts, the demo tools included, as one instance", () => {
    expect(getRegistry()).toBe(getRegistry());
    for (const name of DEMO_NAMES) expect(getRegistry().has(name)).toBe(true);
  });

  it("demo policies: charge lease 60 s, tickets.create fallback 60 s, email.send blocks when stuck", () => {
    expect(registry.get("payments.charge").leaseMs).toBe(60_000);
    expect(registry.get("tickets.create").fallbackTtlMs).toBe(60_000);
    expect(registry.get("email.send").stuckPolicy).toBe("block");
    expect(registry.list().filter((t) => t.fallbackTtlMs !== null).map((t) => t.name)).toEqual(["tickets.create"]);
  });
});

describe("parseArgs", () => {
  const registry = new ToolRegistry([...demoTools, echo]);
  const charge = registry.get("payments.charge");

  it("returns the validated arguments", () => {
    expect(registry.parseArgs(charge, { customerId: "c", amountCents: 100, currency: "USD" })).toEqual({ customerId: "c", amountCents: 100, currency: "USD" });
    expect(registry.parseArgs(registry.get("tickets.list"), undefined)).toEqual({});
    expect(registry.parseArgs(registry.get("tickets.list"), null)).toEqual({});
  });

  it("throws InvalidArgumentsError with one readable issue per problem, each with its path", () => {
    const err = caught(() =>
      registry.parseArgs(charge, { customerId: "c", amountCents: 1.5, currency: "usd", simulate: { outcome: "explode", later: 1 }, amount: 5 }),
    ) as InvalidArgumentsError;
    expect(err).toBeInstanceOf(InvalidArgumentsError);
    expect(err.code).toBe("invalid_arguments");
    expect(err.issues).toEqual(
      expect.arrayContaining([
        { path: "amountCents", message: "must be a whole number of cents" },
        { path: "currency", message: expect.stringContaining("3-letter ISO 4217") },
        { path: "simulate.outcome", message: expect.stringContaining('"decline"') },
        { path: "simulate.later", message: "is not an argument of payments.charge" },
        { path: "amount", message: "is not an argument of payments.charge" },
      ]),
    );
    expect(err.issues).toHaveLength(5);
    expect(err.message).toMatch(/^invalid arguments for payments\.charge: /);
    expect(err.message).toContain("amountCents: must be a whole number of cents");
  });

  it("names missing arguments, array items, and a body that is not an object", () => {
    const missing = caught(() => registry.parseArgs(charge, {})) as InvalidArgumentsError;
    expect(missing.issues.map((i) => i.path).sort()).toEqual(["amountCents", "currency", "customerId"]);
    expect(missing.issues[0].message).toMatch(/expected/);

    const item = caught(() => registry.parseArgs(echo, { text: "t", tags: ["ok", ""] })) as InvalidArgumentsError;
    expect(item.issues).toEqual([{ path: "tags[1]", message: expect.any(String) }]);

    const notObject = caught(() => registry.parseArgs(charge, [1, 2])) as InvalidArgumentsError;
    expect(notObject.issues).toEqual([{ path: "(arguments)", message: expect.stringContaining("expected object") }]);
  });
});

describe("describe and JSON Schema", () => {
  const registry = new ToolRegistry([...demoTools, echo]);

  it("describes policy and arguments as JSON Schema generated from zod", () => {
    const d = registry.describe(registry.get("payments.charge"));
    expect(d).toMatchObject({
      name: "payments.charge",
      kind: "write",
      ttlMs: 86_400_000,
      leaseMs: 60_000,
      stuckPolicy: "block",
      fallbackTtlMs: null,
      idempotencyKey: "required",
      source: "in_process",
    });
    expect(d.argumentsSchema).toMatchObject({
      type: "object",
      required: ["customerId", "amountCents", "currency"],
      additionalProperties: false,
      properties: {
        amountCents: { type: "integer", exclusiveMinimum: 0 },
        currency: { type: "string", pattern: "^[A-Z]{3}$" },
        simulate: { type: "object", properties: { outcome: { enum: ["ok", "decline", "error", "throw_after_effect", "crash_after_effect"] }, latencyMs: { minimum: 0, maximum: 60_000 } } },
      },
    });
    expect(d.argumentsSchema).not.toHaveProperty("$schema");
    expect(d.resultSchema).toMatchObject({ type: "object", required: expect.arrayContaining(["chargeId", "createdAt"]) });
    expect(JSON.parse(JSON.stringify(d))).toEqual(d);
  });

  it("says whether a key is required, optional (fallback) or unused (reads)", () => {
    expect(registry.describe(registry.get("tickets.create")).idempotencyKey).toBe("optional");
    expect(registry.describe(registry.get("tickets.list")).idempotencyKey).toBe("unused");
    expect(registry.describe(echo).resultSchema).toBeNull();
  });

  it("every demo tool documents its arguments and result", () => {
    // a tool run by its caller stores whatever its caller's function returned: no result schema, no simulate
    for (const tool of demoTools.filter((t) => t.runs !== "client")) {
      const d = registry.describe(tool);
      expect(d.argumentsSchema.type, tool.name).toBe("object");
      expect(d.resultSchema, tool.name).not.toBeNull();
      if (tool.kind === "write") expect(Object.keys(d.argumentsSchema.properties as object), tool.name).toContain("simulate");
    }
  });
});

describe("openApiDocument", () => {
  const registry = new ToolRegistry([...demoTools, echo]);
  const doc = registry.openApiDocument("https://idemgate.example.com/");

  function resolve(pointer: string): unknown {
    expect(pointer.startsWith("#/")).toBe(true);
    return pointer
      .slice(2)
      .split("/")
      .map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"))
      .reduce<unknown>((node, part) => (node as Record<string, unknown> | undefined)?.[part], doc);
  }

  it("is OpenAPI 3.1 with one invoke path per tool, a held-calls path per client-run tool, and the tool list", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.servers).toEqual([{ url: "https://idemgate.example.com" }]);
    const names = [...DEMO_NAMES, "test.echo"];
    const invoked = names.filter((n) => registry.get(n).runs !== "client");
    const clientRun = names.filter((n) => registry.get(n).runs === "client");
    expect(clientRun.length).toBeGreaterThan(0);
    expect(Object.keys(doc.paths).filter((p) => !p.includes("reservations") && !p.includes("executions")).sort()).toEqual(
      ["/api/v1/tools", "/api/v1/replays", "/api/v1/runs/{session}", ...invoked.map((n) => `/api/v1/tools/${n}/invoke`), ...clientRun.map((n) => `/api/v1/tools/${n}/held`)].sort(),
    );
    expect(doc.paths["/api/v1/tools"].get).toBeDefined();
    expect(registry.openApiDocument()).not.toHaveProperty("servers");
  });

  it("takes each request body schema from the tool's zod schema", () => {
    for (const tool of registry.list().filter((t) => t.runs !== "client")) {
      const op = doc.paths[`/api/v1/tools/${tool.name}/invoke`].post as any;
      expect(op.requestBody.content["application/json"].schema).toEqual(registry.describe(tool).argumentsSchema);
      expect(op.security).toEqual([{ bearer: [] }]);
    }
  });

  it("documents the headers and the gateway's answers", () => {
    const charge = doc.paths["/api/v1/tools/payments.charge/invoke"].post as any;
    const header = (op: any, name: string) => op.parameters.find((p: any) => p.name === name);
    expect(header(charge, "Idempotency-Key")).toMatchObject({ in: "header", required: true, schema: { maxLength: 255 } });
    expect(header(charge, "Idemgate-Session")).toMatchObject({ in: "header", required: false });
    expect(Object.keys(charge.responses)).toEqual(expect.arrayContaining(["200", "400", "401", "403", "404", "409", "413", "422", "503"]));
    expect(charge.responses["200"].headers["Idempotent-Replayed"]).toBeDefined();
    expect(charge.requestBody.required).toBe(true);

    const ticket = doc.paths["/api/v1/tools/tickets.create/invoke"].post as any;
    expect(header(ticket, "Idempotency-Key").required).toBe(false);

    const list = doc.paths["/api/v1/tools/tickets.list/invoke"].post as any;
    expect(header(list, "Idempotency-Key")).toBeUndefined();
    expect(list.requestBody.required).toBe(false);
    expect(list.responses).not.toHaveProperty("409");

    const conflict = resolve(charge.responses["409"].$ref) as any;
    expect(conflict.content["application/problem+json"].schema).toEqual({ $ref: "#/components/schemas/Problem" });
    expect(resolve("#/components/schemas/Problem")).toMatchObject({ type: "object", required: expect.arrayContaining(["type", "title", "status"]) });
    expect(doc.components).toMatchObject({ securitySchemes: { bearer: { type: "http", scheme: "bearer" } } });
  });

  it("every $ref resolves inside the document, and the document is plain JSON", () => {
    const refs: string[] = [];
    const walk = (node: unknown) => {
      if (Array.isArray(node)) node.forEach(walk);
      else if (node && typeof node === "object") {
        for (const [k, v] of Object.entries(node)) {
          if (k === "$ref" && typeof v === "string") refs.push(v);
          else walk(v);
        }
      }
    };
    walk(doc);
    expect(refs.length).toBeGreaterThan(0);
    for (const r of refs) expect(resolve(r), r).toBeDefined();
    expect(JSON.parse(JSON.stringify(doc))).toEqual(doc);
    const operationIds = Object.values(doc.paths).flatMap((p) => Object.values(p).map((op: any) => op.operationId));
    expect(new Set(operationIds).size).toBe(operationIds.length);
  });
});

describe("runnerFor", () => {
  let testDb: TestPostgres;
  let server: Server;
  let upstreamUrl: string;
  const hits: { key: string | undefined; body: string }[] = [];

  let ready: Promise<void>;

  beforeAll(async () => {
    ready = createTestPostgres("idemgate_test_tools").then((t) => {
      testDb = t;
    });
    ready.catch(() => {});
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        hits.push({ key: req.headers["idempotency-key"] as string | undefined, body });
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ok: true }));
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    upstreamUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  });

  // Awaited per test, so an unreachable PostgreSQL fails these tests rather than skipping them.
  beforeEach(() => ready);

  afterAll(async () => {
    await testDb?.drop();
    server?.closeAllConnections();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  });

  it("binds an in-process tool to the database", async () => {
    const registry = new ToolRegistry([echo]);
    const run = registry.runnerFor(echo, testDb.db.prisma);
    expect(await run({ text: "hi" }, { scope: "s1", key: "k1", session: null, executionId: null })).toEqual({
      status: 201,
      body: { text: "hi", scope: "s1", key: "k1", hasDb: true },
    });
  });

  it("forwards an upstream tool's call over HTTP with its key", async () => {
    const hook = defineTool({
      name: "hooks.fire",
      kind: "write",
      description: "fire a webhook",
      schema: z.strictObject({ event: z.string() }),
      upstream: { url: upstreamUrl, timeoutMs: 2_000 },
    });
    const registry = new ToolRegistry([hook]);
    expect(registry.describe(hook).source).toBe("upstream");
    const args = registry.parseArgs(hook, { event: "paid" });
    const result = await registry.runnerFor(hook, testDb.db.prisma)(args, { scope: "s1", key: "hook-1", session: null, executionId: null });
    expect(result).toEqual({ status: 200, body: { ok: true } });
    // the service receives a key bound to the caller's scope, never the caller's raw key
    expect(hits).toEqual([{ key: derivedKey("s1", "hook-1"), body: JSON.stringify({ event: "paid" }) }]);
  });
});

describe("upstream tools from IDEMGATE_UPSTREAM_TOOLS", () => {
  it("declares forwarded tools from JSON, with defaults", async () => {
    const { upstreamToolsFromEnv } = await import("./upstream-from-env");
    const [tool] = upstreamToolsFromEnv(JSON.stringify([{ name: "billing.create_invoice", url: "http://127.0.0.1:4010/invoices" }]));
    expect(tool).toMatchObject({ name: "billing.create_invoice", kind: "write", upstream: { url: "http://127.0.0.1:4010/invoices", timeoutMs: 10_000 } });
    expect(tool.schema.safeParse({ anything: [1, 2] }).success).toBe(true);
    expect(tool.dedupes).toBe(false);
    const [dedupes] = upstreamToolsFromEnv(
      JSON.stringify([{ name: "billing.charge", url: "http://127.0.0.1:4010/charges", dedupes: true, statusUrl: "http://127.0.0.1:4010/charges/status" }]),
    );
    expect(dedupes).toMatchObject({ dedupes: true, upstream: { statusUrl: "http://127.0.0.1:4010/charges/status" } });
    expect(upstreamToolsFromEnv("")).toEqual([]);
  });

  it("refuses bad JSON and bad declarations readably", async () => {
    const { upstreamToolsFromEnv } = await import("./upstream-from-env");
    expect(() => upstreamToolsFromEnv("[{")).toThrow(/not valid JSON/);
    expect(() => upstreamToolsFromEnv('[{"name":"x.y"}]')).toThrow(/url/);
    expect(() => upstreamToolsFromEnv('[{"name":"Bad Name","url":"http://a"}]')).toThrow(/lower-case dotted/);
    expect(() => upstreamToolsFromEnv('[{"name":"x.y","url":"http://a","timeoutMs":70000}]')).toThrow(/below the lease/);
  });
});
