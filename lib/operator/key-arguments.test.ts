import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { createApiToken } from "@/lib/auth/api-tokens";
import { OutcomeUnknownError } from "@/lib/idempotency/errors";
import { OutcomeUnknown, type ProbeContext } from "@/lib/idempotency/tool";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { defineTool } from "@/lib/tools/define-tool";
import { ToolRegistry } from "@/lib/tools/registry";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { installTestRuntime, invokeTool } from "@/test/support/runtime";
import { getKeyDetail } from "./get-key-detail";
import { probeKey } from "./probe-key";
import { presentKey } from "./present-key";
import { presentKeyDetail } from "./present-key-detail";
import { search } from "./search";

const keyRoute = await import("@/app/api/v1/keys/[scope]/[key]/route");

// What an operator deciding "did it happen?" sees of the call: its arguments as the tool keeps them
// (DESIGN.md § Arguments kept for operators), never another tenant's, handed to the tool's probe;
// and where "It happened" starts.

const ARGS = { customerId: "cus_42", amountCents: 1999, card: { number: "4242424242424242", exp: "12/30" }, customer: { email: "ada@example.com" }, password: "hunter2" };
const SECRETS = ["4242424242424242", "ada@example.com", "hunter2"];

const probed: ProbeContext[] = [];
let answerWith: "upstream" | "candidate" | "nul" = "upstream";

const charge = defineTool({
  name: "psp.charge",
  kind: "write",
  description: "charges a card; the answer never arrives",
  schema: z.looseObject({}),
  redact: ["/customer/email"],
  async run() {
    if (answerWith === "upstream") throw new OutcomeUnknown("the service answered 503", false, undefined, { status: 503, body: '{"chargeId":"ch_maybe","status":"pending"}' });
    if (answerWith === "nul") throw new OutcomeUnknown("the service answered 500", false, undefined, { status: 500, body: "crash\u0000dump" });
    throw new OutcomeUnknown("timed out after 400 ms", true);
  },
  async probe(ctx) {
    probed.push(ctx);
    return { outcome: "unknown", note: "no charge under this key", candidate: { status: 200, body: { chargeId: "ch_found_by_customer", amountCents: 1999 } } };
  },
});
/** a service that echoes what it was sent in its 500, and a write-only field in its schema */
const echo = defineTool({
  name: "psp.echo",
  kind: "write",
  description: "echoes the request in its error",
  schema: z.looseObject({}),
  inputSchema: { type: "object", properties: { hint: { type: "string", writeOnly: true } } },
  async run(args) {
    // (a write-only field is the arguments' schema's word; an answer is read by names and forms only)
    const { hint: _hint, ...echoed } = args as Record<string, unknown>;
    const body = JSON.stringify({ error: "upstream failed", request: echoed, debug: "retry with Authorization: Bearer tok9f8e7d6c5b4a" });
    throw new OutcomeUnknown("the service answered 500", false, undefined, { status: 500, body });
  },
});
const fullTool = defineTool({ name: "psp.full", kind: "write", description: "keeps everything", schema: z.looseObject({}), arguments: "full", run: async () => ({ body: { ok: true } }) });
const noneTool = defineTool({ name: "psp.none", kind: "write", description: "keeps nothing", schema: z.looseObject({}), arguments: "none", run: async () => ({ body: { ok: true } }) });

describe("arguments kept for operators", () => {
  let pg: TestPostgres;
  let runtime: Runtime;
  const tokens: Record<string, string> = {};

  const call = (scope: string, tool: string, key: string, args: unknown) => invokeTool(runtime, scope, tool, key, args);

  async function asToken(scope: string, key: string, token: string) {
    const res = await keyRoute.GET(new Request(`http://idemgate.test/api/v1/keys/${scope}/${key}`, { headers: { authorization: `Bearer ${token}` } }), {
      params: Promise.resolve({ scope, key }),
    });
    return { status: res.status, text: await res.text() };
  }

  beforeAll(async () => {
    pg = await createTestPostgres("key_arguments");
    runtime = installTestRuntime({ db: pg.db, store: new SqlKeyStore(pg.db), registry: new ToolRegistry([charge, fullTool, noneTool, echo]) });
    for (const scope of ["tenant-a", "tenant-b"]) tokens[scope] = (await createApiToken(pg.db.prisma, { scope, actor: "test" })).token;
  }, 120_000);

  afterAll(async () => {
    await runtime?.close();
    await pg?.drop();
  });

  it("keeps them redacted by default (secret names and the tool's pointers) on the key page and in its timeline", async () => {
    await expect(call("tenant-a", "psp.charge", "order-1", ARGS)).rejects.toBeInstanceOf(OutcomeUnknownError);
    await runtime.audit.flush();
    const detail = presentKeyDetail(await getKeyDetail(runtime, "tenant-a", "order-1"));
    const kept = { customerId: "cus_42", amountCents: 1999, card: { number: "[redacted]", exp: "12/30" }, customer: { email: "[redacted]" }, password: "[redacted]" };
    expect(detail.arguments).toEqual({ executionId: detail.record!.executionId, value: kept, kept: "redacted" });
    expect(detail.timeline.find((e) => e.type === "intent")).toMatchObject({ arguments: kept, argumentsKept: "redacted" });
    const text = JSON.stringify(detail);
    for (const secret of SECRETS) expect(text).not.toContain(secret);
  });

  it("keeps them in full, or not at all, as the tool says", async () => {
    await call("tenant-a", "psp.full", "full-1", ARGS);
    await call("tenant-a", "psp.none", "none-1", ARGS);
    await runtime.audit.flush();
    expect((await getKeyDetail(runtime, "tenant-a", "full-1")).arguments).toMatchObject({ value: ARGS, kept: "full" });
    expect((await getKeyDetail(runtime, "tenant-a", "none-1")).arguments).toMatchObject({ value: null, kept: null });
  });

  it("a NUL character in the arguments (which jsonb refuses) does not keep the call from running", async () => {
    for (const tool of ["psp.full", "psp.none"]) await expect(call("tenant-a", tool, `nul-${tool}`, { note: "a\u0000b" })).resolves.toMatchObject({ kind: "executed" });
    await runtime.audit.flush();
    expect((await getKeyDetail(runtime, "tenant-a", "nul-psp.full")).arguments).toMatchObject({ value: { note: "a\uFFFDb" } });
  });

  it("never shows one tenant's arguments to another's token: the same key string in two scopes is two calls", async () => {
    await expect(call("tenant-b", "psp.charge", "order-1", { ...ARGS, customerId: "cus_of_b" })).rejects.toBeInstanceOf(OutcomeUnknownError);
    await runtime.audit.flush();
    const own = await asToken("tenant-a", "order-1", tokens["tenant-a"]);
    expect(own.status).toBe(200);
    expect(JSON.parse(own.text)).toMatchObject({ arguments: { value: { customerId: "cus_42" } } });
    expect(own.text).not.toContain("cus_of_b");
    // the service's answer is for operators resolving the key, not for the tenant
    expect(own.text).not.toContain("ch_maybe");
    const other = await asToken("tenant-a", "order-1", tokens["tenant-b"]);
    expect(other.status).toBe(403);
    expect(other.text).not.toContain("cus_42");
    const theirs = await asToken("tenant-b", "order-1", tokens["tenant-b"]);
    expect(JSON.parse(theirs.text)).toMatchObject({ arguments: { value: { customerId: "cus_of_b" } } });
    expect(theirs.text).not.toContain("cus_42");
  });

  it("'It happened' starts from the service's last answer, then from a candidate the probe found; the probe gets the arguments", async () => {
    const upstream = (await getKeyDetail(runtime, "tenant-a", "order-1")).prefill;
    expect(upstream).toMatchObject({ source: "upstream", status: 503, body: JSON.stringify({ chargeId: "ch_maybe", status: "pending" }, null, 2) });

    const asked = await probeKey(runtime, { scope: "tenant-a", key: "order-1", actor: "ops@example.com" });
    expect(asked).toMatchObject({ action: "none", answer: { outcome: "unknown", candidate: { status: 200 } } });
    expect(probed.at(-1)).toMatchObject({ scope: "tenant-a", key: "order-1", arguments: { customerId: "cus_42", password: "[redacted]" } });
    const fromProbe = (await getKeyDetail(runtime, "tenant-a", "order-1")).prefill;
    expect(fromProbe).toMatchObject({ source: "probe", status: 200, body: JSON.stringify({ chargeId: "ch_found_by_customer", amountCents: 1999 }, null, 2) });
    // another tenant's key of the same name keeps its own
    expect((await getKeyDetail(runtime, "tenant-b", "order-1")).prefill).toMatchObject({ source: "upstream" });
  });

  it("keeps a service answer with a NUL character (which PostgreSQL text refuses) without holding back the audit log", async () => {
    answerWith = "nul";
    await expect(call("tenant-a", "psp.charge", "nul-answer", ARGS)).rejects.toBeInstanceOf(OutcomeUnknownError);
    await runtime.audit.flush();
    expect((await getKeyDetail(runtime, "tenant-a", "nul-answer")).prefill).toMatchObject({ source: "upstream", status: 500, body: "crash\uFFFDdump" });
  });

  it("keeps no secret by name, by form or by the schema's writeOnly, in the arguments or the service's answer; a search by value finds none", async () => {
    const args = { orderId: "ord_9", card: "4000056655665556", tokens: ["tok_live_a1"], passcode: "8812", auth: "Basic dXNlcjpzM2NyZXQ=", stripe_key: "sk_live_51H8abcdefGHIJKLmnop", hint: "my cat's name", author: "Ada" };
    const secrets = ["4000056655665556", "tok_live_a1", "8812", "dXNlcjpzM2NyZXQ=", "sk_live_51H8abcdefGHIJKLmnop", "my cat's name", "tok9f8e7d6c5b4a"];
    await expect(call("tenant-a", "psp.echo", "echo-1", args)).rejects.toBeInstanceOf(OutcomeUnknownError);
    await runtime.audit.flush();
    const detail = presentKeyDetail(await getKeyDetail(runtime, "tenant-a", "echo-1"));
    expect(detail.arguments?.value).toEqual({ orderId: "ord_9", card: "[redacted]", tokens: "[redacted]", passcode: "[redacted]", auth: "[redacted]", stripe_key: "[redacted]", hint: "[redacted]", author: "Ada" });
    expect(detail.prefill).toMatchObject({ source: "upstream", status: 500 });
    expect(JSON.parse(detail.prefill!.body)).toMatchObject({ error: "upstream failed", request: { orderId: "ord_9", author: "Ada", card: "[redacted]" } });
    const page = JSON.stringify(detail);
    for (const secret of secrets) expect(page, secret).not.toContain(secret);
    // nor in the audit log itself: what is not kept cannot leak from a backup or a search
    const row = await pg.db.prisma.execution.findFirst({ where: { scope: "tenant-a", key: "echo-1" } });
    const stored = JSON.stringify(row, (_k, v) => (typeof v === "bigint" ? String(v) : v));
    for (const secret of secrets) expect(stored, secret).not.toContain(secret);
    for (const secret of ["4000056655665556", "8812"]) expect((await search(runtime, secret)).executions, secret).toEqual([]);
    expect((await search(runtime, "ord_9")).executions.map((e) => e.id)).toEqual([row!.id]);
  });

  it("shows a stored result to operators without the secrets it holds; its tenant gets it as stored", async () => {
    await call("tenant-a", "psp.full", "full-secret", { note: "x" });
    await runtime.audit.flush();
    const record = await runtime.store.get("tenant-a", "full-secret");
    const withSecret = { ...record!, result: { ...record!.result!, body: JSON.stringify({ ok: true, password: "hunter2", echoed: "ghp_1234567890abcdefghijABCDEFGHIJ123456" }) } };
    const operator = presentKey(withSecret, Date.now(), true);
    expect(operator.result?.body).toEqual({ ok: true, password: "[redacted]", echoed: "[redacted]" });
    expect(presentKey(withSecret, Date.now(), true, "tenant").result?.body).toMatchObject({ password: "hunter2" });
  });

  it("has nothing to start from when the call ended with no answer", async () => {
    answerWith = "candidate";
    await expect(call("tenant-a", "psp.charge", "timeout-1", ARGS)).rejects.toBeInstanceOf(OutcomeUnknownError);
    await runtime.audit.flush();
    expect((await getKeyDetail(runtime, "tenant-a", "timeout-1")).prefill).toBeNull();
  });
});
