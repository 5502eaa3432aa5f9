import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createApiToken } from "@/lib/auth/api-tokens";
import { OutcomeUnknownError } from "@/lib/idempotency/errors";
import { OutcomeUnknown } from "@/lib/idempotency/tool";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { defineTool } from "@/lib/tools/define-tool";
import { ToolRegistry } from "@/lib/tools/registry";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { installTestRuntime, invokeTool } from "@/test/support/runtime";
import { search } from "./search";

const searchRoute = await import("@/app/api/v1/search/route");

// The console's one search box (docs/operate.md § Find anything): a key or a prefix, an execution
// id, an argument value of a kept call, or tool:… state:… scope:…; a tenant's token finds its own only.

const charge = defineTool({
  name: "psp.charge",
  kind: "write",
  description: "charges a card; the answer never arrives",
  schema: z.looseObject({}),
  async run() {
    throw new OutcomeUnknown("timed out after 400 ms", true);
  },
});
const mail = defineTool({ name: "mail.send", kind: "write", description: "sends", schema: z.looseObject({}), run: async () => ({ body: { ok: true } }) });

describe("search", () => {
  let pg: TestPostgres;
  let runtime: Runtime;
  const tokens: Record<string, string> = {};

  const call = (scope: string, tool: string, key: string, args: unknown) => invokeTool(runtime, scope, tool, key, args);
  const asToken = async (q: string, scope: string) => {
    const res = await searchRoute.GET(new Request(`http://idemgate.test/api/v1/search?q=${encodeURIComponent(q)}`, { headers: { authorization: `Bearer ${tokens[scope]}` } }), {
      params: Promise.resolve({}),
    });
    return { status: res.status, type: res.headers.get("content-type"), body: JSON.parse(await res.text()) };
  };

  beforeAll(async () => {
    pg = await createTestPostgres("search");
    runtime = installTestRuntime({ db: pg.db, store: new SqlKeyStore(pg.db), registry: new ToolRegistry([charge, mail]) });
    for (const scope of ["tenant-a", "tenant-b"]) tokens[scope] = (await createApiToken(pg.db.prisma, { scope, actor: "test" })).token;
    await expect(call("tenant-a", "psp.charge", "order-7:charge", { customerId: "cus_777", amountCents: 1999, shipping: { zip: "10115" } })).rejects.toBeInstanceOf(OutcomeUnknownError);
    await expect(call("tenant-b", "psp.charge", "order-8:charge", { customer: "cus_777", amountCents: 500 })).rejects.toBeInstanceOf(OutcomeUnknownError);
    await call("tenant-a", "mail.send", "order-7:mail", { to: "ada@example.com", orderRef: 7 });
    await call("tenant-a", "mail.send", "welcome-1", { to: "bob@example.com" });
    await runtime.audit.flush();
  }, 120_000);

  afterAll(async () => {
    await runtime?.close();
    await pg?.drop();
  });

  it("finds a key by its name and by a prefix, the exact one first", async () => {
    const exact = await search(runtime, "order-7:mail");
    expect(exact.keys.map((k) => k.key)).toEqual(["order-7:mail"]);
    const prefix = await search(runtime, "order-");
    expect(prefix.keys.map((k) => `${k.scope}/${k.key}`).sort()).toEqual(["tenant-a/order-7:charge", "tenant-a/order-7:mail", "tenant-b/order-8:charge"]);
  });

  it("finds an execution by its id, with the key it ran for", async () => {
    const [key] = (await search(runtime, "welcome-1")).keys;
    const answer = await search(runtime, ` ${key.executionId!} `);
    expect(answer.executions[0]).toMatchObject({ id: key.executionId, scope: "tenant-a", key: "welcome-1", tool: "mail.send", matched: "id" });
  });

  it("finds executions by an argument value: bare under every name seen, or name:value, nested with dots, numbers as numbers", async () => {
    const bare = await search(runtime, "cus_777");
    expect(bare.executions.map((e) => `${e.scope}/${e.key}`).sort()).toEqual(["tenant-a/order-7:charge", "tenant-b/order-8:charge"]);
    expect(bare.argumentNames).toEqual([]);
    const named = await search(runtime, "customerId:cus_777");
    expect(named.executions.map((e) => e.key)).toEqual(["order-7:charge"]);
    expect((await search(runtime, "shipping.zip:10115")).executions.map((e) => e.key)).toEqual(["order-7:charge"]);
    expect((await search(runtime, "orderRef:7")).executions.map((e) => e.key)).toEqual(["order-7:mail"]);
    expect((await search(runtime, "1999")).executions.map((e) => e.key)).toEqual(["order-7:charge"]);
    expect((await search(runtime, "cus_nobody")).executions).toEqual([]);
    expect([bare.argumentMatches, named.argumentMatches, bare.moreExecutions, bare.argumentMatchesCapped]).toEqual([2, 1, 0, false]);
  });

  it("says how many calls hold a value when more than the 50 listed do", async () => {
    for (let i = 0; i < 55; i++) await call("tenant-b", "mail.send", `digest-${i}`, { to: `reader-${i}@example.com`, campaign: "spring-digest" });
    await runtime.audit.flush();
    const answer = await search(runtime, "campaign:spring-digest");
    expect(answer.executions).toHaveLength(50);
    // the newest first
    expect(answer.executions[0].key).toBe("digest-54");
    expect([answer.argumentMatches, answer.moreExecutions, answer.argumentMatchesCapped]).toEqual([55, 5, false]);
    // a tenant's token counts its own calls only
    expect((await asToken("campaign:spring-digest", "tenant-a")).body).toMatchObject({ executions: [], argumentMatches: 0, moreExecutions: 0 });
    expect((await asToken("campaign:spring-digest", "tenant-b")).body).toMatchObject({ argumentMatches: 55, moreExecutions: 5 });
    // a value both tenants' calls hold: each token counts its own one, the operator both
    expect((await asToken("cus_777", "tenant-a")).body).toMatchObject({ argumentMatches: 1, moreExecutions: 0 });
    expect((await search(runtime, "cus_777")).argumentMatches).toBe(2);
  });

  it("one tenant's many argument names do not hide another tenant's values from a bare search", async () => {
    // 45 names that sort before every other tenant's: one call used to fill the list of names a bare value was tried under
    const crowd = Object.fromEntries(Array.from({ length: 45 }, (_, i) => [`a${String(i).padStart(2, "0")}`, `v${i}`]));
    await call("tenant-a", "mail.send", "crowd-1", crowd);
    await call("tenant-b", "mail.send", "receipt-9", { zz_recipient: "zed@example.com" });
    await runtime.audit.flush();
    expect((await search(runtime, "zed@example.com")).executions.map((e) => `${e.scope}/${e.key}`)).toEqual(["tenant-b/receipt-9"]);
    expect((await search(runtime, "v44")).executions.map((e) => `${e.scope}/${e.key}`)).toEqual(["tenant-a/crowd-1"]);
    expect((await search(runtime, "cus_777")).executions.map((e) => `${e.scope}/${e.key}`).sort()).toEqual(["tenant-a/order-7:charge", "tenant-b/order-8:charge"]);
    const b = await asToken("zed@example.com", "tenant-b");
    expect(b.body.executions.map((e: { key: string }) => e.key)).toEqual(["receipt-9"]);
    expect((await asToken("zed@example.com", "tenant-a")).body.executions).toEqual([]);
  });

  it("tool:… state:… scope:… lists the keys the keys list would", async () => {
    const answer = await search(runtime, "tool:psp.charge state:unknown");
    expect(answer.filter).toEqual({ tool: "psp.charge", state: "unknown" });
    expect(answer.keys.map((k) => k.key).sort()).toEqual(["order-7:charge", "order-8:charge"]);
    expect((await search(runtime, "scope:tenant-a tool:mail.send welcome")).keys.map((k) => k.key)).toEqual(["welcome-1"]);
  });

  it("a tenant's token finds its own scope only", async () => {
    const a = await asToken("cus_777", "tenant-a");
    expect(a.status).toBe(200);
    expect(a.body.executions.map((e: { scope: string }) => e.scope)).toEqual(["tenant-a"]);
    // tenant-b's call has the value under a name tenant-a never used
    expect((await asToken("customer:cus_777", "tenant-a")).body.executions).toEqual([]);
    expect((await asToken("customer:cus_777", "tenant-b")).body.executions.map((e: { scope: string }) => e.scope)).toEqual(["tenant-b"]);
    const b = await asToken("order-", "tenant-b");
    expect(b.body.keys.map((k: { key: string }) => k.key)).toEqual(["order-8:charge"]);
    const [key] = (await search(runtime, "welcome-1")).keys;
    expect((await asToken(key.executionId!, "tenant-b")).body.executions).toEqual([]);
    expect((await asToken("scope:tenant-a state:unknown", "tenant-b")).body.keys).toEqual([]);
    expect((await asToken("state:unknown", "tenant-b")).body.keys.map((k: { scope: string }) => k.scope)).toEqual(["tenant-b"]);
  });

  it("a bad query is a readable 400 problem", async () => {
    for (const [q, said] of [
      ["", /type something/],
      ["state:sideways", /state:sideways is not a key state/],
      ["tool: state:done", /tool: needs a value/],
      ["two words", /one thing at a time/],
      ["x".repeat(300), /at most 255/],
    ] as const) {
      const res = await asToken(q, "tenant-a");
      expect(res.status, q).toBe(400);
      expect(res.type).toContain("application/problem+json");
      expect(res.body.detail).toMatch(said);
    }
  });
});
