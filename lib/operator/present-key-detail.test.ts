import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { listOperatorActions } from "@/lib/audit/operator-actions";
import { createApiToken } from "@/lib/auth/api-tokens";
import { consoleInvoke } from "@/lib/gateway/console-invoke";
import { OutcomeUnknownError } from "@/lib/idempotency/errors";
import { NotRunError } from "@/lib/idempotency/tool";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { defineTool } from "@/lib/tools/define-tool";
import { demoTools } from "@/lib/tools/demo";
import { ToolRegistry } from "@/lib/tools/registry";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { installTestRuntime } from "@/test/support/runtime";
import { getKeyDetail } from "./get-key-detail";
import { PUBLIC_THREW_NOTE } from "./present-key";
import { presentKeyDetail, presentKeyDetailForTenant } from "./present-key-detail";
import { releaseKey } from "./release-key";
import { resolveKey } from "./resolve-key";

// The route modules import the console's session code, which marks itself server-only; the API
// token path under test never reads a cookie.
const keyRoute = await import("@/app/api/v1/keys/[scope]/[key]/route");
const listRoute = await import("@/app/api/v1/keys/route");

// A tenant reading its own key through the API (an API token) sees what happened to it, and that an
// operator stepped in and when, but not the operator's email or reason, nor a tool's exception
// message; an operator (console session) sees all of it.

const SCOPE = "acme";
const OPERATOR = "ops-lead@example.com";
const REASON = "Checked with the PSP dashboard: charge ch_123 exists";
const RELEASE_REASON = "Asked on-call (Jane, +44 20 7946 0000): nothing was written";
const EXCEPTION = "connect ECONNREFUSED 10.20.30.40:5432 (ledger-db.internal, user billing)";

const fragile = defineTool({
  name: "ledger.post",
  kind: "write",
  description: "posts to the ledger; fails as told",
  schema: z.strictObject({ amountCents: z.number().int(), fail: z.enum(["throw", "not_run"]) }),
  async run(args) {
    if (args.fail === "not_run") throw new NotRunError("the ledger is closed for the night; nothing was posted");
    throw new Error(EXCEPTION);
  },
});

describe("a key's detail: tenants do not see operators' emails, reasons or exception messages", () => {
  let pg: TestPostgres;
  let runtime: Runtime;
  let token: string;

  async function unknownCall(key: string) {
    const tool = runtime.registry.get("ledger.post");
    const args = runtime.registry.parseArgs(tool, { amountCents: 500, fail: "throw" });
    await expect(runtime.engine.invoke(tool, runtime.registry.runnerFor(tool, runtime.db.prisma), { scope: SCOPE, key, args, caller: "token" })).rejects.toBeInstanceOf(
      OutcomeUnknownError,
    );
    await runtime.audit.flush();
  }

  async function asTenant(path: string, route: { GET: (request: Request, ctx: { params: Promise<never> }) => Promise<Response> }, params: unknown) {
    const res = await route.GET(new Request(`http://idemgate.test${path}`, { headers: { authorization: `Bearer ${token}` } }), {
      params: Promise.resolve(params as never),
    });
    return { status: res.status, text: await res.text() };
  }

  beforeAll(async () => {
    pg = await createTestPostgres("key_detail_tenant");
    runtime = installTestRuntime({ db: pg.db, store: new SqlKeyStore(pg.db), registry: new ToolRegistry([...demoTools, fragile]) });
    token = (await createApiToken(pg.db.prisma, { scope: SCOPE, actor: "test" })).token;

    // resolved by an operator after an exception; released by an operator; one left unknown; one not run
    await unknownCall("resolved-1");
    await resolveKey(runtime, { scope: SCOPE, key: "resolved-1", actor: OPERATOR, reason: REASON, result: { posted: true } });
    await unknownCall("released-1");
    await releaseKey(runtime, { scope: SCOPE, key: "released-1", actor: OPERATOR, reason: RELEASE_REASON });
    await unknownCall("unknown-1");
    const tool = runtime.registry.get("ledger.post");
    await runtime.engine
      .invoke(tool, runtime.registry.runnerFor(tool, runtime.db.prisma), { scope: SCOPE, key: "not-run-1", args: { amountCents: 1, fail: "not_run" } })
      .catch(() => {});
    await runtime.audit.flush();
  }, 120_000);

  afterAll(async () => {
    await runtime?.close();
    await pg?.drop();
  });

  it("GET /api/v1/keys/{scope}/{key} with a token: that an operator resolved it and when, not who or why", async () => {
    const { status, text } = await asTenant(`/api/v1/keys/${SCOPE}/resolved-1`, keyRoute, { scope: SCOPE, key: "resolved-1" });
    expect(status).toBe(200);
    for (const secret of [OPERATOR, REASON, EXCEPTION, "ECONNREFUSED"]) expect(text).not.toContain(secret);
    const view = JSON.parse(text) as { state: string; record: { result: unknown }; timeline: Record<string, unknown>[] };
    expect(view.state).toBe("done");
    expect(view.record.result).toMatchObject({ status: 200, body: { posted: true } });
    const operatorEvents = view.timeline.filter((e) => e.type === "operator");
    expect(operatorEvents).toEqual([{ type: "operator", at: expect.any(String), action: "resolve" }]);
    // the call's own outcome stays (unknown, with the generic note), and the decision is the operator's
    // action, not a second outcome with the call's duration
    expect(view.timeline.filter((e) => e.type === "outcome")).toEqual([expect.objectContaining({ outcome: "unknown", error: PUBLIC_THREW_NOTE })]);
    expect(view.timeline.map((e) => e.type)).toEqual(["intent", "outcome", "operator"]);

    // the operator's view of the same key has all of it
    const full = JSON.stringify(presentKeyDetail(await getKeyDetail(runtime, SCOPE, "resolved-1")));
    for (const detail of [OPERATOR, REASON]) expect(full).toContain(detail);
  });

  it("a released key: the release and when; an unknown key: the generic note; a not-run call: the tool's own message", async () => {
    const released = await asTenant(`/api/v1/keys/${SCOPE}/released-1`, keyRoute, { scope: SCOPE, key: "released-1" });
    expect(released.status).toBe(200);
    for (const secret of [OPERATOR, RELEASE_REASON, EXCEPTION]) expect(released.text).not.toContain(secret);
    const releasedView = JSON.parse(released.text) as { timeline: { type: string }[] };
    expect(releasedView.timeline.filter((e) => e.type === "operator")).toEqual([{ type: "operator", at: expect.any(String), action: "release" }]);
    expect(releasedView.timeline.filter((e) => e.type === "outcome")).toEqual([expect.objectContaining({ outcome: "unknown", error: PUBLIC_THREW_NOTE })]);
    expect(releasedView.timeline.map((e) => e.type)).toEqual(["intent", "outcome", "operator"]);
    // the operator sees the call's own note, not the release as an outcome
    const releasedFull = presentKeyDetail(await getKeyDetail(runtime, SCOPE, "released-1"));
    expect(releasedFull.timeline.filter((e) => e.type === "outcome")).toEqual([expect.objectContaining({ outcome: "unknown", error: expect.stringContaining(EXCEPTION) })]);

    const unknown = await asTenant(`/api/v1/keys/${SCOPE}/unknown-1`, keyRoute, { scope: SCOPE, key: "unknown-1" });
    expect(JSON.parse(unknown.text)).toMatchObject({ state: "unknown", record: { outcomeNote: PUBLIC_THREW_NOTE } });
    expect((JSON.parse(unknown.text) as { timeline: { type: string }[] }).timeline.find((e) => e.type === "outcome")).toMatchObject({
      outcome: "unknown",
      error: PUBLIC_THREW_NOTE,
    });
    expect(unknown.text).not.toContain(EXCEPTION);
    expect(JSON.stringify(presentKeyDetail(await getKeyDetail(runtime, SCOPE, "unknown-1")))).toContain(EXCEPTION);

    // what the caller was told when the tool said nothing happened is no secret
    const notRun = presentKeyDetailForTenant(await getKeyDetail(runtime, SCOPE, "not-run-1"));
    expect(notRun.timeline.find((e) => e.type === "outcome")).toMatchObject({ outcome: "failed", error: "the ledger is closed for the night; nothing was posted" });
  });

  it("a call an operator made from the console's invoke form: the tenant sees that an operator called, not who", async () => {
    const args = JSON.stringify({ customerId: "cus-console", amountCents: 1200, currency: "EUR" });
    const operator = { id: "op-1", email: OPERATOR, role: "operator" as const };
    const first = await consoleInvoke({ tool: "payments.charge", scope: SCOPE, key: "console-1", arguments: args }, operator, runtime);
    expect(first.response.status).toBe(200);
    // and again: a replay, recorded as a suppression with the same caller
    const again = await consoleInvoke({ tool: "payments.charge", scope: SCOPE, key: "console-1", arguments: args }, operator, runtime);
    expect(again.response.headers["Idempotent-Replayed"]).toBe("true");
    await runtime.audit.flush();

    const { status, text } = await asTenant(`/api/v1/keys/${SCOPE}/console-1`, keyRoute, { scope: SCOPE, key: "console-1" });
    expect(status).toBe(200);
    expect(text).not.toContain(OPERATOR);
    const view = JSON.parse(text) as { timeline: { type: string; caller?: string | null }[] };
    expect(view.timeline.filter((e) => e.type === "intent" || e.type === "suppression").map((e) => [e.type, e.caller])).toEqual([
      ["intent", "operator"],
      ["suppression", "operator"],
    ]);
    // the operator's view names them
    const full = presentKeyDetail(await getKeyDetail(runtime, SCOPE, "console-1"));
    expect(full.timeline.find((e) => e.type === "intent")).toMatchObject({ caller: `operator:${OPERATOR}` });

    // each run is a row of the operator audit trail: the answer's facts, never the arguments
    const trail = await listOperatorActions(runtime.db.prisma, { limit: 10, action: "invoke", actor: OPERATOR, target: "console-1" });
    expect(trail.items).toHaveLength(2);
    expect(trail.items.map((a) => [a.scope, a.key, a.stateAfter])).toEqual(expect.arrayContaining([
      [SCOPE, "console-1", expect.objectContaining({ tool: "payments.charge", status: 200, replayed: true })],
      [SCOPE, "console-1", expect.objectContaining({ tool: "payments.charge", status: 200, replayed: false, executionId: expect.any(String) })],
    ]));
    expect(JSON.stringify(trail.items)).not.toContain("cus-console");
  });

  it("GET /api/v1/keys with a token lists unknown keys with the generic note", async () => {
    const { status, text } = await asTenant(`/api/v1/keys?state=unknown`, listRoute, {});
    expect(status).toBe(200);
    expect(JSON.parse(text)).toMatchObject({ items: [{ key: "unknown-1", outcomeNote: PUBLIC_THREW_NOTE }] });
    expect(text).not.toContain(EXCEPTION);
  });
});
