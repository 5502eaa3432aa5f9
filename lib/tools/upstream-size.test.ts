import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { useEngineFixture } from "@/test/support/engine-fixture";
import { defineTool } from "./define-tool";
import { ToolRegistry } from "./registry";
import { DEFAULT_MAX_RESPONSE_BYTES } from "./upstream";

/**
 * An upstream answer is read up to a cap (1 MiB by default, `maxResponseBytes` per tool). A larger
 * answer to an applied call (2xx) is still a known outcome: the call is done, never sent again, and
 * its stored result says that the service applied it and that the body was not kept.
 */
let server: Server;
let base: string;
const hits = new Map<string, number>();

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const path = req.url ?? "/";
      hits.set(path, (hits.get(path) ?? 0) + 1);
      if (path === "/huge-chunked" || path === "/huge-declared") {
        // 32 MiB, without a length (chunked) or with one
        const chunk = Buffer.alloc(64 * 1024, "x");
        const total = 32 * 1024 * 1024;
        res.writeHead(200, path === "/huge-declared" ? { "content-type": "application/json", "content-length": String(total) } : { "content-type": "application/json" });
        let sent = 0;
        const pump = () => {
          while (sent < total) {
            sent += chunk.length;
            if (!res.write(chunk)) return void res.once("drain", pump);
          }
          res.end();
        };
        res.on("error", () => {});
        return pump();
      }
      if (path === "/small") return res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ ok: "x".repeat(900) }));
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

describe("upstream answers larger than a tool keeps", () => {
  const t = useEngineFixture("redis");
  const tool = (name: string, path: string, maxResponseBytes?: number) =>
    defineTool({ name, kind: "write", description: name, schema: z.looseObject({}), upstream: { url: `${base}${path}`, timeoutMs: 10_000, maxResponseBytes } });
  // the service's port is known once it listens
  const tools = () => {
    const chunked = tool("big.chunked", "/huge-chunked");
    const declared = tool("big.declared", "/huge-declared");
    const small = tool("big.small", "/small", 512);
    return { chunked, declared, small, registry: new ToolRegistry([chunked, declared, small]) };
  };
  const call = (definition: ReturnType<typeof tool>, registry: ToolRegistry, scope: string, key: string) =>
    t.engine.invoke(definition, registry.runnerFor(definition, t.db.prisma), { scope, key, args: {} });

  it("stores a placeholder that says the call was applied with its status; the retry replays it and nothing is sent again", async () => {
    const scope = `big-${randomUUID().slice(0, 6)}`;
    const { chunked, declared, registry } = tools();
    for (const [definition, path] of [[chunked, "/huge-chunked"], [declared, "/huge-declared"]] as const) {
      const first = await call(definition, registry, scope, `k-${path}`);
      expect(first.kind).toBe("executed");
      expect(first.status).toBe(200);
      const body = JSON.parse(first.body);
      expect(body).toEqual({
        idemgate: {
          resultTooLarge: true,
          status: 200,
          maxResponseBytes: DEFAULT_MAX_RESPONSE_BYTES,
          note: `the service answered 200 with a body larger than ${DEFAULT_MAX_RESPONSE_BYTES} bytes, which is not kept; the call is done and is not sent again`,
        },
      });
      const retry = await call(definition, registry, scope, `k-${path}`);
      expect(retry).toMatchObject({ kind: "replayed", status: 200, body: first.body });
      expect(hits.get(path)).toBe(1);
      const record = await t.store.get(scope, `k-${path}`);
      expect(record?.status).toBe("done");
      expect(record!.result!.body.length).toBeLessThan(1_000);
      hits.delete(path);
    }
  });

  it("takes a tool's own maxResponseBytes", async () => {
    const scope = `big-${randomUUID().slice(0, 6)}`;
    const { small, registry } = tools();
    const answer = await call(small, registry, scope, "k");
    expect(answer.status).toBe(201);
    expect(JSON.parse(answer.body)).toMatchObject({ idemgate: { resultTooLarge: true, status: 201, maxResponseBytes: 512 } });
  });
});
