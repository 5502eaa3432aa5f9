import { randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { readPausedTool, readPausedTools } from "@/lib/audit/paused-tools-table";
import { createApiToken } from "@/lib/auth/api-tokens";
import type { OperatorIdentity } from "@/lib/auth/roles";
import { IdemgateClient, ToolPausedError } from "@/lib/client/index";
import { handleInvoke } from "@/lib/gateway/fast-invoke";
import { PausedTools } from "@/lib/idempotency/paused-tools";
import { setWebhookEndpoints } from "@/lib/notifications/endpoints";
import type { Runtime } from "@/lib/server/runtime";
import { toolListSchema } from "@/lib/tools/api-schemas";
import { defineTool } from "@/lib/tools/define-tool";
import { ToolRegistry } from "@/lib/tools/registry";
import { installTestRuntime } from "@/test/support/runtime";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";

// Pausing a write tool: an operator's pause (API route, audited, a webhook event) makes the
// gateway refuse the tool's new first executions with 503 tool_paused before anything is
// reserved — through /invoke and the reservation API (the TypeScript client's guard()) — while a
// done key still replays; resume restores it. Against real key stores and a real audit database.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let signedIn: OperatorIdentity | null = null;
vi.mock("@/lib/auth/session", () => ({ currentOperator: async () => signedIn }));
const pauseRoute = await import("@/app/api/v1/tools/[tool]/pause/route");
const resumeRoute = await import("@/app/api/v1/tools/[tool]/resume/route");
const toolsRoute = await import("@/app/api/v1/tools/route");

const OPERATOR: OperatorIdentity = { id: "o", email: "ops@example.com", role: "operator" };
const VIEWER: OperatorIdentity = { id: "v", email: "viewer@example.com", role: "viewer" };

/** an in-process write tool that counts its side effects */
function countingCharge() {
  const ran: unknown[] = [];
  const tool = defineTool({
    name: "pause.charge",
    kind: "write",
    description: "a charge that counts its runs",
    schema: z.strictObject({ amountCents: z.number().int() }),
    run: async (args) => {
      ran.push(args);
      return { body: { chargeId: `ch_${ran.length}` } };
    },
  });
  return { tool, ran };
}
const clientRun = defineTool({ name: "pause.client_charge", kind: "write", runs: "client", description: "a charge in the caller's process", schema: z.object({ amountCents: z.number().int() }) });
const readTool = defineTool({ name: "pause.balance", kind: "read", description: "a read", schema: z.object({}), run: async () => ({ body: { balanceCents: 0 } }) });
const declaredPaused = defineTool({ name: "pause.declared", kind: "write", paused: true, description: "paused in the file", schema: z.object({}), run: async () => ({ body: { ok: true } }) });

for (const kind of ["postgres", "redis"] as const) {
  describe(`pausing a tool (${kind} key store)`, () => {
    let under: StoreUnderTest;
    let runtime: Runtime;
    let server: Server;
    let base: string;
    let token: string;
    const scope = `pause-${randomUUID().slice(0, 8)}`;
    const charge = countingCharge();

    const operatorPost = async (route: typeof pauseRoute, tool: string, body: unknown, who: OperatorIdentity | null = OPERATOR, headers: Record<string, string> = {}) => {
      signedIn = who;
      const res = await route.POST(
        new Request(`http://idemgate.test/api/v1/tools/${tool}/x`, { method: "POST", headers: { host: "idemgate.test", origin: "http://idemgate.test", "content-type": "application/json", ...headers }, body: JSON.stringify(body) }),
        { params: Promise.resolve({ tool }) },
      );
      return { status: res.status, type: res.headers.get("content-type"), body: (await res.json()) as Json };
    };
    const invoke = async (tool: string, key: string, args: unknown) => {
      const res = await fetch(`${base}/api/v1/tools/${tool}/invoke`, { method: "POST", headers: { authorization: `Bearer ${token}`, "idempotency-key": key, "content-type": "application/json" }, body: JSON.stringify(args) });
      return { status: res.status, headers: res.headers, body: (await res.json()) as Json };
    };

    beforeAll(async () => {
      under = await openTestStore(kind);
      runtime = installTestRuntime({ db: under.db, store: under.store, registry: new ToolRegistry([charge.tool, clientRun, readTool, declaredPaused]) });
      token = (await createApiToken(under.db.prisma, { scope, actor: "test" })).token;
      server = createServer((req, res) => {
        if (!handleInvoke(req, res)) res.writeHead(404).end();
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      setWebhookEndpoints([{ name: "ops", url: "http://127.0.0.1:9/hook", secret: "s".repeat(32), events: ["tool.paused", "tool.resumed"], format: "idemgate", timeoutMs: 1000, maxAttempts: 1, retryBackoffMs: 1000 }]);
    }, 120_000);

    afterAll(async () => {
      setWebhookEndpoints([]);
      await new Promise((resolve) => server?.close(resolve));
      await runtime?.close();
      await under?.cleanup();
    });

    it("refuses bad pauses with a problem and changes nothing", async () => {
      const cases: [typeof pauseRoute, string, unknown, OperatorIdentity | null, Record<string, string>, number, string][] = [
        [pauseRoute, "pause.charge", { reason: "provider incident" }, VIEWER, {}, 403, "/problems/forbidden"],
        [pauseRoute, "pause.charge", { reason: "provider incident" }, null, { authorization: `Bearer ${token}` }, 403, "/problems/forbidden"],
        [pauseRoute, "pause.charge", { reason: "provider incident" }, null, {}, 401, "/problems/unauthorized"],
        [pauseRoute, "pause.nothing", { reason: "provider incident" }, OPERATOR, {}, 404, "/problems/unknown_tool"],
        [pauseRoute, "pause.balance", { reason: "provider incident" }, OPERATOR, {}, 400, "/problems/invalid_request"],
        [pauseRoute, "pause.charge", {}, OPERATOR, {}, 400, "/problems/invalid_arguments"],
        [pauseRoute, "pause.charge", { reason: "  " }, OPERATOR, {}, 400, "/problems/invalid_arguments"],
        [resumeRoute, "pause.charge", { reason: "all good" }, OPERATOR, {}, 409, "/problems/invalid_state"],
        [resumeRoute, "pause.declared", { reason: "all good" }, OPERATOR, {}, 409, "/problems/invalid_state"],
      ];
      for (const [route, tool, body, who, headers, status, type] of cases) {
        const res = await operatorPost(route, tool, body, who, headers);
        expect(res.status, `${tool} ${JSON.stringify(body)} ${who?.role}`).toBe(status);
        expect(res.type).toContain("application/problem+json");
        expect(res.body.type).toBe(type);
      }
      expect(await readPausedTools(under.db)).toEqual([]);
      expect(await under.db.prisma.operatorAction.count({ where: { action: { in: ["tool_pause", "tool_resume"] } } })).toBe(0);
    });

    it("pauses: a new first execution is refused with nothing reserved or run, a done key still replays; resume restores it", async () => {
      const done = await invoke("pause.charge", "done-before-pause", { amountCents: 100 });
      expect(done.status).toBe(200);
      expect(charge.ran).toHaveLength(1);

      const paused = await operatorPost(pauseRoute, "pause.charge", { reason: "the provider double-charges" });
      expect(paused.status).toBe(200);
      expect(paused.body).toMatchObject({ tool: "pause.charge", paused: true, reason: "the provider double-charges", actor: "ops@example.com", source: "operator" });

      const refused = await invoke("pause.charge", "new-while-paused", { amountCents: 200 });
      expect(refused.status).toBe(503);
      expect(refused.headers.get("content-type")).toContain("application/problem+json");
      expect(refused.headers.get("retry-after")).toBe("30");
      expect(refused.body).toMatchObject({ type: "/problems/tool_paused", tool: "pause.charge", reason: "the provider double-charges" });
      expect(typeof refused.body.pausedAt).toBe("string");
      expect(charge.ran).toHaveLength(1);
      expect(await under.store.get(scope, "new-while-paused")).toBeNull();
      await runtime.audit.flush();
      expect(await under.db.prisma.execution.count({ where: { key: "new-while-paused" } })).toBe(0);

      // a retry of a done key is answered from its record, as before
      const replay = await invoke("pause.charge", "done-before-pause", { amountCents: 100 });
      expect(replay.status).toBe(200);
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      expect(replay.body).toEqual(done.body);
      // the same key with other arguments is still a mismatch, not a pause
      expect((await invoke("pause.charge", "done-before-pause", { amountCents: 999 })).status).toBe(422);

      const resumed = await operatorPost(resumeRoute, "pause.charge", { reason: "provider fixed it" });
      expect(resumed.body).toMatchObject({ tool: "pause.charge", paused: false });
      const after = await invoke("pause.charge", "new-while-paused", { amountCents: 200 });
      expect(after.status).toBe(200);
      expect(charge.ran).toHaveLength(2);

      const trail = await under.db.prisma.operatorAction.findMany({ where: { action: { in: ["tool_pause", "tool_resume"] } }, orderBy: { at: "asc" } });
      expect(trail.map((a) => [a.action, a.actor, a.reason])).toEqual([
        ["tool_pause", "ops@example.com", "the provider double-charges"],
        ["tool_resume", "ops@example.com", "provider fixed it"],
      ]);
      const events = await under.db.prisma.webhookDelivery.findMany({ orderBy: { createdAt: "asc" } });
      expect(events.map((e) => e.eventType)).toEqual(["tool.paused", "tool.resumed"]);
      expect((events[0].event as Json).data).toMatchObject({ tool: "pause.charge", anomaly: null, operator: { actor: "ops@example.com", reason: "the provider double-charges", toolPath: "/tools/pause.charge" } });
    });

    it("the reservation API refuses a paused tool: guard() does not run the function and throws ToolPausedError", async () => {
      const client = new IdemgateClient({ baseUrl: base, token, replayCache: false, retry: { maxAttempts: 3, baseDelayMs: 10 } });
      let ran = 0;
      expect(await client.guard("pause.client_charge", { amountCents: 1 }, () => ({ n: ++ran }), { key: "guard-done" })).toEqual({ n: 1 });
      await operatorPost(pauseRoute, "pause.client_charge", { reason: "ledger migration" });
      const attempts: unknown[] = [];
      const client2 = new IdemgateClient({ baseUrl: base, token, replayCache: false, retry: { maxAttempts: 3, baseDelayMs: 10 }, onAttempt: (e) => attempts.push(e) });
      const err = await client2.guard("pause.client_charge", { amountCents: 2 }, () => ++ran, { key: "guard-new" }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ToolPausedError);
      expect((err as ToolPausedError).reason).toBe("ledger migration");
      expect((err as ToolPausedError).status).toBe(503);
      expect(attempts).toHaveLength(1);
      expect(ran).toBe(1);
      // a done key's reservation answers its result
      expect(await client2.guard("pause.client_charge", { amountCents: 1 }, () => ({ n: ++ran }), { key: "guard-done" })).toEqual({ n: 1 });
      expect(ran).toBe(1);
      await operatorPost(resumeRoute, "pause.client_charge", { reason: "migration done" });
      expect(await client2.guard("pause.client_charge", { amountCents: 2 }, () => ++ran, { key: "guard-new" })).toBe(2);
    });

    it("GET /api/v1/tools shows an API token each tool's pause: why and since when while paused, null once resumed and for reads", async () => {
      const listed = async () => {
        signedIn = null;
        const res = await toolsRoute.GET(new Request("http://idemgate.test/api/v1/tools", { headers: { host: "idemgate.test", authorization: `Bearer ${token}` } }), { params: Promise.resolve({}) });
        expect(res.status).toBe(200);
        const body = (await res.json()) as Json;
        // the answer is the one the OpenAPI document publishes: its types, and no field it does not name
        toolListSchema.parse(body);
        const documented = Object.keys(toolListSchema.shape.tools.element.shape).sort();
        for (const t of body.tools as Json[]) expect(Object.keys(t).sort(), t.name).toEqual(documented);
        return Object.fromEntries((body.tools as Json[]).map((t) => [t.name, t.paused]));
      };
      expect(await listed()).toEqual({
        "pause.charge": null,
        "pause.client_charge": null,
        "pause.balance": null,
        "pause.declared": { reason: "declared paused in the configuration file", pausedAt: null, source: "config" },
      });
      const before = Date.now();
      await operatorPost(pauseRoute, "pause.client_charge", { reason: "ledger migration" });
      try {
        const paused = (await listed())["pause.client_charge"];
        // the operator who paused it is for the console and the operator log, not for API tokens
        expect(Object.keys(paused).sort()).toEqual(["pausedAt", "reason", "source"]);
        expect(paused).toMatchObject({ reason: "ledger migration", source: "operator" });
        expect(Date.parse(paused.pausedAt)).toBeGreaterThanOrEqual(before - 1_000);
      } finally {
        await operatorPost(resumeRoute, "pause.client_charge", { reason: "migration done" });
      }
      expect((await listed())["pause.client_charge"]).toBeNull();
    });

    it("a tool declared paused refuses new calls without any operator row", async () => {
      const res = await invoke("pause.declared", "declared-1", {});
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ type: "/problems/tool_paused", reason: "declared paused in the configuration file" });
    });

    it("resumes at once: one resumes the tool, the others are told it is not paused (409), one audit row", async () => {
      expect((await operatorPost(pauseRoute, "pause.charge", { reason: "racing resumes" })).status).toBe(200);
      const before = await under.db.prisma.operatorAction.count({ where: { action: "tool_resume" } });
      signedIn = OPERATOR;
      const post = (reason: string) =>
        resumeRoute.POST(
          new Request("http://idemgate.test/api/v1/tools/pause.charge/resume", { method: "POST", headers: { host: "idemgate.test", origin: "http://idemgate.test", "content-type": "application/json" }, body: JSON.stringify({ reason }) }),
          { params: Promise.resolve({ tool: "pause.charge" }) },
        );
      const answers = await Promise.all(["first", "second", "third", "fourth"].map(post));
      expect(answers.map((r) => r.status).sort()).toEqual([200, 409, 409, 409]);
      const refused = answers.find((r) => r.status === 409)!;
      expect(((await refused.json()) as Json).type).toBe("/problems/invalid_state");
      expect(await under.db.prisma.operatorAction.count({ where: { action: "tool_resume" } })).toBe(before + 1);
      expect(await readPausedTools(under.db)).toEqual([]);
    });

    it("another process's reader sees a pause at its next read", async () => {
      const other = new PausedTools(() => readPausedTools(under.db));
      await other.refresh();
      expect(other.get("pause.charge")).toBeNull();
      await operatorPost(pauseRoute, "pause.charge", { reason: "second process check" });
      await other.refresh();
      expect(other.get("pause.charge")).toMatchObject({ reason: "second process check", actor: "ops@example.com" });
      // the driver's read (epoch milliseconds from the column) agrees with Prisma's, to the millisecond
      const written = await readPausedTool(under.db.prisma, "pause.charge");
      expect(written?.pausedAtMs).toBeGreaterThan(Date.now() - 60_000);
      expect(other.get("pause.charge")).toEqual(written);
      await operatorPost(resumeRoute, "pause.charge", { reason: "done" });
      await other.refresh();
      expect(other.get("pause.charge")).toBeNull();
    });
  });
}
