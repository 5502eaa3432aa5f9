import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createApiToken } from "@/lib/auth/api-tokens";
import type { OperatorIdentity } from "@/lib/auth/roles";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { ToolRegistry } from "@/lib/tools/registry";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { installTestRuntime } from "@/test/support/runtime";
import { deliverDue } from "./deliver";
import { setWebhookEndpoints } from "./endpoints";
import { eventsForOpenedAnomalies } from "./events";
import { enqueueEvents } from "./outbox";
import { SIGNATURE_HEADER, verifySignature } from "./signature";
import { webhookEndpointSchema, type WebhookEndpoint } from "./webhook-config";

// Redelivering a webhook from the console: the same event (same id) to the same endpoint again, as a
// new series of attempts with new signatures, against a real PostgreSQL and a local receiver;
// operators only, recorded in the operator trail.

let signedIn: OperatorIdentity | null = null;
vi.mock("@/lib/auth/session", () => ({ currentOperator: async () => signedIn }));
const redeliverRoute = await import("@/app/api/v1/webhooks/deliveries/[id]/redeliver/route");

const SECRET = "whsec_redeliver_0123456789ab";
const OPERATOR: OperatorIdentity = { id: "o", email: "ops@example.com", role: "operator" };

describe("redeliver a webhook delivery", () => {
  let pg: TestPostgres;
  let runtime: Runtime;
  let server: Server;
  let endpoint: WebhookEndpoint;
  /** what the receiver accepted: the event id in the body and the headers it came with */
  const received: { id: string; headers: IncomingHttpHeaders }[] = [];
  let rejected = 0;

  const post = async (id: string, body: unknown, headers: Record<string, string> = { origin: "http://idemgate.test", host: "idemgate.test" }) => {
    const res = await redeliverRoute.POST(
      new Request(`http://idemgate.test/api/v1/webhooks/deliveries/${id}/redeliver`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) }),
      { params: Promise.resolve({ id }) },
    );
    return { status: res.status, type: res.headers.get("content-type"), body: (await res.json()) as Record<string, unknown> };
  };

  beforeAll(async () => {
    pg = await createTestPostgres("webhook_redeliver");
    runtime = installTestRuntime({ db: pg.db, store: new SqlKeyStore(pg.db), registry: new ToolRegistry([]) });
    server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body = Buffer.concat(chunks).toString("utf8");
      if (!verifySignature(req.headers[SIGNATURE_HEADER.toLowerCase()] as string | undefined, body, SECRET).ok) {
        rejected++;
        res.writeHead(400).end();
        return;
      }
      received.push({ id: (JSON.parse(body) as { id: string }).id, headers: req.headers });
      res.writeHead(200).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    endpoint = webhookEndpointSchema.parse({ name: "ops", url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/ops`, secret: SECRET });
    setWebhookEndpoints([endpoint]);
  }, 120_000);

  afterAll(async () => {
    vi.useRealTimers();
    setWebhookEndpoints([]);
    server?.close();
    await runtime?.close();
    await pg?.drop();
  });

  it("sends the same event again with a new signature timestamp, restarting its attempts, and records who asked", async () => {
    const [event] = eventsForOpenedAnomalies([
      { id: "a1", type: "orphan_unknown_outcome", dedupeKey: "unknown_outcome:e1", tool: "payments.charge", scope: "demo", key: "order-1", summary: "may have charged", evidence: { cause: "reported", executionId: "e1" }, detectedAt: new Date() },
    ]);
    await enqueueEvents(pg.db.prisma, [endpoint], [event]);
    expect(await deliverDue(pg.db.prisma, [endpoint], { owner: "a" })).toMatchObject({ delivered: 1 });
    const row = await pg.db.prisma.webhookDelivery.findFirstOrThrow();

    signedIn = OPERATOR;
    const answer = await post(row.id, { reason: "the receiver lost its database; send it again" });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body).toMatchObject({ redelivered: true, eventId: event.id, endpoint: "ops", previousStatus: "delivered" });
    // one row per (endpoint, event): the same row is due again, its attempts restarted
    expect(await pg.db.prisma.webhookDelivery.count()).toBe(1);
    expect(await pg.db.prisma.webhookDelivery.findFirstOrThrow()).toMatchObject({ id: row.id, status: "pending", attempts: 0, deliveredAt: null, lastStatus: null, lastError: null, lastAttemptAt: null });
    // the reconciler finding the same event again still adds nothing
    expect(await enqueueEvents(pg.db.prisma, [endpoint], [event])).toBe(0);

    // a minute later: the signature's timestamp is the new attempt's
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 60_000 });
    expect(await deliverDue(pg.db.prisma, [endpoint], { owner: "a" })).toMatchObject({ claimed: 1, delivered: 1 });
    vi.useRealTimers();
    expect(rejected).toBe(0);
    expect(received.map((r) => r.id)).toEqual([event.id, event.id]);
    expect(received.map((r) => r.headers["idemgate-event-id"])).toEqual([event.id, event.id]);
    expect(received.map((r) => r.headers["idemgate-delivery-attempt"])).toEqual(["1", "1"]);
    const stamp = (h: IncomingHttpHeaders) => Number(/t=(\d+)/.exec(String(h[SIGNATURE_HEADER.toLowerCase()]))![1]);
    expect(stamp(received[1].headers) - stamp(received[0].headers)).toBeGreaterThanOrEqual(59);

    const after = await pg.db.prisma.webhookDelivery.findFirstOrThrow();
    expect(after).toMatchObject({ status: "delivered", attempts: 1 });
    const log = after.log as { status: number | null; redeliveredBy?: string }[];
    expect(log.map((a) => a.redeliveredBy ?? a.status)).toEqual([200, "ops@example.com", 200]);
    const [action] = await pg.db.prisma.operatorAction.findMany({ where: { action: "redeliver_webhook" } });
    expect(action).toMatchObject({
      actor: "ops@example.com",
      reason: "the receiver lost its database; send it again",
      scope: "demo",
      key: "order-1",
      stateBefore: { delivery: row.id, eventId: event.id, status: "delivered", attempts: 1 },
      stateAfter: { status: "pending", attempts: 0 },
    });
  });

  it("refuses a pending delivery, no reason, an unknown id, a viewer and a tenant's token, changing nothing", async () => {
    const row = await pg.db.prisma.webhookDelivery.findFirstOrThrow();
    signedIn = OPERATOR;
    await pg.db.prisma.webhookDelivery.update({ where: { id: row.id }, data: { status: "pending" } });
    const pending = await post(row.id, { reason: "again" });
    expect(pending.status).toBe(409);
    expect(pending.type).toContain("application/problem+json");
    expect(pending.body.detail).toMatch(/still pending/);
    await pg.db.prisma.webhookDelivery.update({ where: { id: row.id }, data: { status: "failed" } });

    expect((await post(row.id, { reason: "" })).status).toBe(400);
    expect((await post("00000000-0000-0000-0000-000000000000", { reason: "again" })).status).toBe(404);
    // a cross-site form carries the session cookie but not this console's Origin
    expect((await post(row.id, { reason: "again" }, { origin: "http://evil.test", host: "idemgate.test" })).status).toBe(403);
    signedIn = { id: "v", email: "viewer@example.com", role: "viewer" };
    const viewer = await post(row.id, { reason: "again" });
    expect(viewer.status).toBe(403);
    expect(viewer.body.detail).toMatch(/viewer role may not redeliver/);
    signedIn = null;
    const token = (await createApiToken(pg.db.prisma, { scope: "demo", actor: "test" })).token;
    expect((await post(row.id, { reason: "again" }, { authorization: `Bearer ${token}` })).status).toBe(403);

    expect(await pg.db.prisma.webhookDelivery.findFirstOrThrow()).toMatchObject({ status: "failed", attempts: row.attempts });
    expect(await pg.db.prisma.operatorAction.count({ where: { action: "redeliver_webhook" } })).toBe(1);
  });
});
