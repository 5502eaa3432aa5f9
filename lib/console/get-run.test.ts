import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createApiToken } from "@/lib/auth/api-tokens";
import type { OperatorIdentity } from "@/lib/auth/roles";
import { handleInvoke } from "@/lib/gateway/fast-invoke";
import { exceptionNote, PUBLIC_THREW_NOTE } from "@/lib/idempotency/outcome-note";
import { OutcomeUnknown } from "@/lib/idempotency/tool";
import type { Runtime } from "@/lib/server/runtime";
import { defineTool } from "@/lib/tools/define-tool";
import { ToolRegistry } from "@/lib/tools/registry";
import { installTestRuntime } from "@/test/support/runtime";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";

// A run (one Idemgate-Session) read back in time order through GET /api/v1/runs/{session}: what
// happened to each call (ran, replayed, refused as a duplicate or a mismatch, held unknown), paged
// with a cursor; tenant-scoped; a bad session at the gateway is a 400 that reserves nothing.

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let signedIn: OperatorIdentity | null = null;
vi.mock("@/lib/auth/session", () => ({ currentOperator: async () => signedIn }));
const runRoute = await import("@/app/api/v1/runs/[session]/route");

let release: (() => void) | null = null;
const slow = defineTool({
  name: "run.charge",
  kind: "write",
  description: "a charge that waits when asked to",
  schema: z.strictObject({ amountCents: z.number().int(), hold: z.boolean().optional() }),
  run: async (args) => {
    if (args.hold) await new Promise<void>((resolve) => (release = resolve));
    return { body: { charged: args.amountCents } };
  },
});
const flaky = defineTool({
  name: "run.ledger",
  kind: "write",
  description: "a ledger posting whose outcome cannot be told",
  schema: z.object({}),
  run: async () => {
    throw new OutcomeUnknown("the ledger timed out");
  },
});

for (const kind of ["postgres", "redis"] as const) {
  describe(`a run's calls (${kind} key store)`, () => {
    let under: StoreUnderTest;
    let runtime: Runtime;
    let server: Server;
    let base: string;
    let tokenA: string;
    let tokenB: string;

    const call = async (tool: string, key: string, args: unknown, session: string | null, token = tokenA) => {
      const res = await fetch(`${base}/api/v1/tools/${tool}/invoke`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "idempotency-key": key, "content-type": "application/json", ...(session === null ? {} : { "idemgate-session": session }) },
        body: JSON.stringify(args),
      });
      return { status: res.status, body: (await res.json()) as Json };
    };
    const getRun = async (session: string, query = "", headers: Record<string, string> = { authorization: `Bearer ${tokenA}` }) => {
      const res = await runRoute.GET(new Request(`http://idemgate.test/api/v1/runs/${encodeURIComponent(session)}${query}`, { headers }), { params: Promise.resolve({ session }) });
      return { status: res.status, body: (await res.json()) as Json };
    };

    beforeAll(async () => {
      under = await openTestStore(kind);
      runtime = installTestRuntime({ db: under.db, store: under.store, registry: new ToolRegistry([slow, flaky]) });
      tokenA = (await createApiToken(under.db.prisma, { scope: "run-a", actor: "test" })).token;
      tokenB = (await createApiToken(under.db.prisma, { scope: "run-b", actor: "test" })).token;
      server = createServer((req, res) => {
        if (!handleInvoke(req, res)) res.writeHead(404).end();
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    }, 120_000);

    afterAll(async () => {
      await new Promise((resolve) => server?.close(resolve));
      await runtime?.close();
      await under?.cleanup();
    });

    it("shows every call of the session in time order with what happened, a page at a time", async () => {
      const run = `agent-run-${kind}`;
      expect((await call("run.charge", "c-1", { amountCents: 100 }, run)).status).toBe(200);
      expect((await call("run.charge", "c-1", { amountCents: 100 }, run)).status).toBe(200); // replay
      const first = call("run.charge", "c-2", { amountCents: 200, hold: true }, run);
      await vi.waitFor(() => expect(release).not.toBeNull());
      expect((await call("run.charge", "c-2", { amountCents: 200, hold: true }, run)).status).toBe(409); // refused duplicate
      release!();
      release = null;
      expect((await first).status).toBe(200);
      expect((await call("run.charge", "c-1", { amountCents: 999 }, run)).status).toBe(422);
      expect((await call("run.ledger", "l-1", {}, run)).status).toBe(502); // held unknown
      expect((await call("run.charge", "other", { amountCents: 1 }, "another-run")).status).toBe(200);
      await runtime.audit.flush();

      const all = await getRun(run);
      expect(all.status).toBe(200);
      expect(all.body).toMatchObject({ session: run, scope: "run-a", nextCursor: null });
      expect(all.body.calls.map((c: Json) => [c.tool, c.key, c.happened])).toEqual([
        ["run.charge", "c-1", "ran"],
        ["run.charge", "c-1", "replayed"],
        ["run.charge", "c-2", "ran"],
        ["run.charge", "c-2", "refused_duplicate"],
        ["run.charge", "c-1", "refused_mismatch"],
        ["run.ledger", "l-1", "held_unknown"],
      ]);
      expect(all.body.calls[0]).toMatchObject({ source: "execution", outcome: "succeeded", resultStatus: 200, keyPath: "/keys/run-a/c-1" });
      expect(all.body.calls[1].executionId).toBe(all.body.calls[0].executionId);

      // paged: 2 + 2 + 2, the same calls in the same order
      const paged: Json[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page: { status: number; body: Json } = await getRun(run, `?limit=2${cursor ? `&cursor=${cursor}` : ""}`);
        expect(page.status).toBe(200);
        paged.push(...page.body.calls);
        cursor = page.body.nextCursor;
        pages++;
      } while (cursor);
      expect(pages).toBe(3);
      expect(paged.map((c) => c.id)).toEqual(all.body.calls.map((c: Json) => c.id));

      // an operator reads it by scope, or without one when the session has calls in one scope only
      signedIn = { id: "v", email: "viewer@example.com", role: "viewer" };
      expect((await getRun(run, "", {})).body.calls).toHaveLength(6);
      expect((await getRun(run, "?scope=run-a", {})).body.calls).toHaveLength(6);
    });

    it("answers another tenant's run as one that does not exist, and refuses bad input with a problem", async () => {
      await call("run.charge", "b-1", { amountCents: 5 }, "tenant-b-run", tokenB);
      await runtime.audit.flush();
      const other = await getRun("tenant-b-run");
      const none = await getRun("no-such-run");
      expect(other.status).toBe(404);
      expect(none.status).toBe(404);
      expect({ ...other.body, detail: null, instance: null }).toEqual({ ...none.body, detail: null, instance: null });
      expect(other.body.type).toBe("/problems/not_found");
      for (const [session, query, type] of [
        ["x".repeat(201), "", "/problems/invalid_request"],
        ["a b", "", "/problems/invalid_request"],
        [`agent-run-${kind}`, "?limit=0", "/problems/invalid_request"],
        [`agent-run-${kind}`, "?cursor=bm9wZQ", "/problems/invalid_cursor"],
        // tampered: a whole number no Date can hold, either way
        [`agent-run-${kind}`, `?cursor=${Buffer.from(JSON.stringify([Number.MAX_SAFE_INTEGER, "e-1"])).toString("base64url")}`, "/problems/invalid_cursor"],
        [`agent-run-${kind}`, `?cursor=${Buffer.from(JSON.stringify([-8.64e15 - 1, "e-1"])).toString("base64url")}`, "/problems/invalid_cursor"],
      ]) {
        const res = await getRun(session, query);
        expect(res.status, `${session.slice(0, 10)} ${query}`).toBe(400);
        expect(res.body.type).toBe(type);
      }
    });

    it("shows a tenant its calls as its key detail does: no exception messages, no operator's name, no anomalies; an operator sees them", async () => {
      const run = `tenant-view-${kind}`;
      const at = (s: number) => new Date(Date.UTC(2026, 2, 1, 12, 0, s));
      const execution = { scope: "run-a", tool: "run.charge", fingerprint: "f", token: 1n, session: run, leaseUntil: at(59) };
      await under.db.prisma.execution.createMany({
        data: [
          { ...execution, id: `${run}-threw`, key: "threw", startedAt: at(1), outcome: "unknown", error: exceptionNote("connect ECONNREFUSED 10.0.0.7:5432 password=hunter2") },
          { ...execution, id: `${run}-failed`, key: "failed", startedAt: at(2), outcome: "failed", error: "card declined" },
          { ...execution, id: `${run}-final`, key: "final", startedAt: at(3), outcome: "final_error", error: "upstream said: internal trace 0xdead" },
          { ...execution, id: `${run}-by-operator`, key: "by-operator", startedAt: at(4), outcome: "succeeded", caller: "operator:ops@example.com" },
          { ...execution, id: `${run}-by-token`, key: "by-token", startedAt: at(5), outcome: "succeeded", caller: "tok_label" },
        ],
      });
      await under.db.prisma.suppression.create({ data: { id: `${run}-stale`, scope: "run-a", key: "by-token", tool: "run.charge", kind: "replay", session: run, at: at(6), originalExecutionId: `${run}-by-token` } });
      await under.db.prisma.anomaly.create({
        data: { id: `${run}-anomaly`, type: "stale_suppression", dedupeKey: `stale:${run}-stale`, tool: "run.charge", scope: "run-a", key: "by-token", summary: "s", evidence: {}, detectedAt: at(7), updatedAt: at(7) },
      });
      const view = (body: Json) => body.calls.map((c: Json) => [c.key, c.note, c.caller, c.anomaly?.id ?? null]);

      const tenant = await getRun(run);
      expect(tenant.status).toBe(200);
      expect(view(tenant.body)).toEqual([
        ["threw", PUBLIC_THREW_NOTE, null, null],
        ["failed", "card declined", null, null],
        ["final", null, null, null],
        ["by-operator", null, "operator", null],
        ["by-token", null, "tok_label", null],
        ["by-token", null, null, null],
      ]);
      expect(JSON.stringify(tenant.body)).not.toMatch(/hunter2|0xdead|ops@example\.com|-anomaly/);

      signedIn = { id: "v", email: "viewer@example.com", role: "viewer" };
      const operator = await getRun(run, "?scope=run-a", {});
      expect(view(operator.body)).toEqual([
        ["threw", exceptionNote("connect ECONNREFUSED 10.0.0.7:5432 password=hunter2"), null, null],
        ["failed", "card declined", null, null],
        ["final", "upstream said: internal trace 0xdead", null, null],
        ["by-operator", null, "operator:ops@example.com", null],
        ["by-token", null, "tok_label", null],
        ["by-token", null, null, `${run}-anomaly`],
      ]);
    });

    it("refuses an empty, too long or unprintable session at the gateway with nothing reserved", async () => {
      for (const [i, session] of ["", "s".repeat(201), "tab\there", "naïve"].entries()) {
        const res = await fetch(`${base}/api/v1/tools/run.charge/invoke`, {
          method: "POST",
          headers: { authorization: `Bearer ${tokenA}`, "idempotency-key": `bad-session-${i}`, "content-type": "application/json", "idemgate-session": session },
          body: JSON.stringify({ amountCents: 1 }),
        }).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
        // undici refuses to send a header value that is not a ByteString; what is sent must be refused
        if (res instanceof Error) continue;
        expect(res.status, JSON.stringify(session)).toBe(400);
        expect(((await res.json()) as Json).type).toBe("/problems/invalid_header");
        expect(await under.store.get("run-a", `bad-session-${i}`)).toBeNull();
      }
    });
  });
}
