import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { POST as invokeRoute } from "@/app/api/v1/tools/[tool]/invoke/route";
import { createApiToken } from "@/lib/auth/api-tokens";
import { handleInvoke } from "@/lib/gateway/fast-invoke";
import { InvalidArgumentsError } from "@/lib/idempotency/errors";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { defineTool } from "@/lib/tools/define-tool";
import { ToolRegistry } from "@/lib/tools/registry";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { HttpError } from "./problem";
import { parseJsonBytes, readJsonBody } from "./read-body";
import { installTestRuntime } from "@/test/support/runtime";

const nested = (levels: number, inner = "1") => "[".repeat(levels) + inner + "]".repeat(levels);
const bytes = (text: string) => new TextEncoder().encode(text);

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error("did not throw");
}

describe("parseJsonBytes", () => {
  it("parses 64 levels and refuses 65 as invalid_json, before parsing", () => {
    expect(parseJsonBytes(bytes(nested(64)))).toEqual(JSON.parse(nested(64)));
    const err = thrown(() => parseJsonBytes(bytes(nested(65))));
    expect(err).toBeInstanceOf(HttpError);
    expect(err).toMatchObject({ code: "invalid_json", status: 400, message: "the body nests arrays and objects more than 64 levels deep" });
  });

  it("refuses 100,000 levels before parsing (no recursion to overflow)", () => {
    const body = bytes(`{"a":${nested(100_000)}}`);
    expect(thrown(() => parseJsonBytes(body))).toMatchObject({ code: "invalid_json", message: "the body nests arrays and objects more than 64 levels deep" });
  });

  it("refuses integers beyond ±(2^53 − 1) as invalid_arguments naming each path; keeps safe ones exact", () => {
    const err = thrown(() => parseJsonBytes(bytes('{"amountCents": 9007199254740993, "lines": [{"sku": 18446744073709551615}]}')));
    expect(err).toBeInstanceOf(InvalidArgumentsError);
    expect(err).toMatchObject({
      code: "invalid_arguments",
      issues: [
        { path: "amountCents", message: "9007199254740993 is beyond ±(2^53 − 1) and would be rounded; send it as a string" },
        { path: "lines[0].sku", message: expect.stringContaining("18446744073709551615") },
      ],
    });
    expect((err as Error).message).toContain("amountCents, lines[0].sku");
    expect(parseJsonBytes(bytes('{"max": 9007199254740991, "min": -9007199254740991, "big": "9007199254740993", "f": 1e21}'))).toEqual({
      max: Number.MAX_SAFE_INTEGER,
      min: Number.MIN_SAFE_INTEGER,
      big: "9007199254740993",
      f: 1e21,
    });
  });

  it("reports malformed JSON as such, even when it also holds a huge integer", () => {
    expect(thrown(() => parseJsonBytes(bytes('{"a": 9007199254740993,')))).toMatchObject({ code: "invalid_json" });
  });

  it("applies through readJsonBody (the App Router's and the console's body reader)", async () => {
    const request = (body: string) => new Request("http://gateway.invalid/", { method: "POST", headers: { "Content-Type": "application/json" }, body });
    await expect(readJsonBody(request(`{"a":${nested(1_000)}}`))).rejects.toMatchObject({ code: "invalid_json" });
    await expect(readJsonBody(request('{"n": 12345678901234567890}'))).rejects.toMatchObject({ code: "invalid_arguments", issues: [{ path: "n" }] });
  });
});

/**
 * The gateway end to end: the node:http fast path (handleInvoke) and the App Router route, over a
 * real runtime (PostgreSQL key store and audit log) and an upstream tool whose service records the
 * exact bytes it is sent.
 */
describe("the invoke endpoint refuses what it cannot carry exactly", () => {
  let pg: TestPostgres;
  let runtime: Runtime;
  let token: string;
  let service: Server;
  let gateway: Server;
  let gatewayUrl: string;
  let received: string[] = [];

  beforeAll(async () => {
    service = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () => {
        received.push(body);
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ recorded: true }));
      });
    });
    await new Promise<void>((resolve) => service.listen(0, "127.0.0.1", resolve));
    const serviceUrl = `http://127.0.0.1:${(service.address() as AddressInfo).port}/record`;

    pg = await createTestPostgres("json_limits");
    const store = new SqlKeyStore(pg.db);
    const registry = new ToolRegistry([
      defineTool({ name: "ledger.record", kind: "write", description: "records what it is sent", schema: z.looseObject({}), upstream: { url: serviceUrl, timeoutMs: 5_000 } }),
    ]);
    runtime = installTestRuntime({ db: pg.db, store, registry });
    token = (await createApiToken(pg.db.prisma, { scope: "tenant-a", actor: "test" })).token;

    gateway = createServer((req, res) => {
      if (!handleInvoke(req, res)) {
        res.writeHead(404);
        res.end();
      }
    });
    await new Promise<void>((resolve) => gateway.listen(0, "127.0.0.1", resolve));
    gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    gateway?.closeAllConnections();
    service?.closeAllConnections();
    await new Promise((resolve) => gateway?.close(resolve));
    await new Promise((resolve) => service?.close(resolve));
    await runtime?.close();
    await pg?.drop();
  });

  beforeEach(() => {
    received = [];
  });

  const headers = (key: string) => ({ Authorization: `Bearer ${token}`, "Content-Type": "application/json", "Idempotency-Key": key });

  async function fastPath(body: string, key: string) {
    const res = await fetch(`${gatewayUrl}/api/v1/tools/ledger.record/invoke`, { method: "POST", headers: headers(key), body });
    return { status: res.status, type: res.headers.get("content-type"), body: await res.json() };
  }

  async function appRoute(body: string, key: string) {
    const request = new Request("http://gateway.invalid/api/v1/tools/ledger.record/invoke", { method: "POST", headers: headers(key), body });
    const res = await invokeRoute(request, { params: Promise.resolve({ tool: "ledger.record" }) });
    return { status: res.status, type: res.headers.get("content-type"), body: await res.json() };
  }

  for (const [name, send] of [
    ["fast path", fastPath],
    ["App Router route", appRoute],
  ] as const) {
    describe(name, () => {
      it("answers 100,000 levels of nesting with a 400 invalid_json problem; the service hears nothing", async () => {
        const out = await send(`{"note":${nested(100_000)}}`, `deep-${name}`);
        expect(out.status).toBe(400);
        expect(out.type).toMatch(/^application\/problem\+json/);
        expect(out.body).toMatchObject({ type: "/problems/invalid_json", status: 400, detail: "the body nests arrays and objects more than 64 levels deep" });
        expect(received).toEqual([]);
        expect(await runtime.store.get("tenant-a", `deep-${name}`)).toBeNull();
      });

      it("answers an integer beyond 2^53 with a 400 invalid_arguments problem naming its path; the service hears nothing", async () => {
        const out = await send('{"amountCents": 9007199254740993, "lines": [{"qty": 1}, {"qty": 2}]}', `huge-${name}`);
        expect(out.status).toBe(400);
        expect(out.body).toMatchObject({ type: "/problems/invalid_arguments", errors: [{ path: "amountCents" }] });
        expect(out.body.detail).toContain("amountCents");
        expect(received).toEqual([]);
      });

      it("forwards the largest safe integer exactly, and a huge one sent as a string", async () => {
        const out = await send('{"amountCents": 9007199254740991, "ref": "9007199254740993"}', `exact-${name}`);
        expect(out).toMatchObject({ status: 200, body: { recorded: true } });
        expect(received).toHaveLength(1);
        expect(JSON.parse(received[0])).toEqual({ amountCents: 9007199254740991, ref: "9007199254740993" });
        expect(received[0]).toContain("9007199254740991");
      });

      it.each([".", ".."])("refuses the key %j with 400 invalid_key; the service hears nothing", async (key) => {
        const out = await send('{"a": 1}', key);
        expect(out.status).toBe(400);
        expect(out.body).toMatchObject({ type: "/problems/invalid_key", detail: expect.stringContaining("URL path segment") });
        expect(received).toEqual([]);
      });
    });
  }
});
