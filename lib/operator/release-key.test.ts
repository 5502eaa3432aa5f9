import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setAnomalyStatus } from "@/lib/anomalies/anomalies";
import { reconcile } from "@/lib/anomalies/reconcile";
import { PrismaAuditWriter } from "@/lib/audit/audit-writer";
import { Engine } from "@/lib/idempotency/engine";
import { InvalidStateError, OutcomeUnknownError } from "@/lib/idempotency/errors";
import { getRegistry } from "@/lib/tools";
import { openTestStore, type StoreUnderTest } from "@/test/support/stores";
import { bulkReleaseKeys } from "./bulk-release-keys";
import { releaseKey } from "./release-key";
import { resolveKey } from "./resolve-key";

// A decision about a key (release or resolve, from any page, the command line or a bulk release)
// answers its open unknown-outcome anomaly: the anomaly is resolved, and the trail says by whom.
describe("deciding a key closes its unknown-outcome anomaly", () => {
  let t: StoreUnderTest;
  let audit: PrismaAuditWriter;
  let engine: Engine;
  const registry = getRegistry();
  const charge = registry.get("payments.charge");
  const runtime = () => ({ db: t.db, store: t.store, engine, registry });
  const operator = "ops@example.com";

  beforeAll(async () => {
    t = await openTestStore("redis");
    audit = new PrismaAuditWriter(t.db.prisma, { flushIntervalMs: 5 });
    engine = new Engine({ store: t.store, audit });
  });
  afterAll(async () => {
    await audit?.close();
    await t?.cleanup();
  });

  /** A charge whose outcome is unknown (it charged, then threw), flagged by a reconciler pass. */
  async function unknownCharge(scope: string, key: string) {
    const args = registry.parseArgs(charge, { customerId: "cus_1", amountCents: 900, currency: "EUR", simulate: { outcome: "throw_after_effect" } });
    await expect(engine.invoke(charge, registry.runnerFor(charge, t.db.prisma), { scope, key, args })).rejects.toBeInstanceOf(OutcomeUnknownError);
    await audit.flush();
    await reconcile({ prisma: t.db.prisma, store: t.store }, { settleMs: 0 });
    const anomaly = await t.db.prisma.anomaly.findFirstOrThrow({ where: { scope, key, type: "orphan_unknown_outcome" } });
    expect(anomaly.status).toBe("open");
    return anomaly;
  }
  const closing = (anomalyId: string) => t.db.prisma.operatorAction.findMany({ where: { anomalyId, action: "resolve_anomaly" } });

  it("a release resolves the key's open anomaly, recorded with the operator and the release's reason", async () => {
    const scope = `rel-${randomUUID().slice(0, 8)}`;
    const anomaly = await unknownCharge(scope, "k");
    await releaseKey(runtime(), { scope, key: "k", actor: operator, reason: "PSP shows no charge" });
    expect((await t.db.prisma.anomaly.findUniqueOrThrow({ where: { id: anomaly.id } })).status).toBe("resolved");
    const [action] = await closing(anomaly.id);
    expect(action).toMatchObject({ actor: operator, scope, key: "k", reason: `key released by ${operator}: PSP shows no charge` });
    expect(action.stateBefore).toMatchObject({ status: "open", type: "orphan_unknown_outcome" });
    expect(action.stateAfter).toMatchObject({ status: "resolved", keyDecision: "released" });
  });

  it("so does a resolve", async () => {
    const scope = `res-${randomUUID().slice(0, 8)}`;
    const anomaly = await unknownCharge(scope, "k");
    await resolveKey(runtime(), { scope, key: "k", actor: operator, reason: "PSP shows the charge", result: { chargeId: "ch_psp" } });
    expect((await t.db.prisma.anomaly.findUniqueOrThrow({ where: { id: anomaly.id } })).status).toBe("resolved");
    expect((await closing(anomaly.id)).map((a) => a.reason)).toEqual([`key resolved by ${operator}: PSP shows the charge`]);
  });

  it("and a bulk release, for each key it releases", async () => {
    const scope = `bulk-${randomUUID().slice(0, 8)}`;
    const a = await unknownCharge(scope, "a");
    const b = await unknownCharge(scope, "b");
    const out = await bulkReleaseKeys(runtime(), { keys: [{ scope, key: "a" }, { scope, key: "b" }], actor: operator, reason: "PSP outage: none of these went through" });
    expect(out).toMatchObject({ released: 2, refused: [] });
    const statuses = await t.db.prisma.anomaly.findMany({ where: { id: { in: [a.id, b.id] } }, select: { status: true } });
    expect(statuses.map((s) => s.status)).toEqual(["resolved", "resolved"]);
  });

  it("leaves an anomaly an operator acknowledged to that operator, and a refused release closes nothing", async () => {
    const scope = `ack-${randomUUID().slice(0, 8)}`;
    const anomaly = await unknownCharge(scope, "k");
    await setAnomalyStatus(t.db.prisma, { id: anomaly.id, status: "acknowledged", actor: "other@example.com", reason: "checking the PSP" });
    await releaseKey(runtime(), { scope, key: "k", actor: operator, reason: "PSP shows no charge" });
    expect((await t.db.prisma.anomaly.findUniqueOrThrow({ where: { id: anomaly.id } })).status).toBe("acknowledged");

    const open = await unknownCharge(scope, "k2");
    await resolveKey(runtime(), { scope, key: "k2", actor: operator, reason: "it happened", result: { ok: true } });
    // the key is done now: a second decision is refused, and changes nothing
    await expect(releaseKey(runtime(), { scope, key: "k2", actor: operator, reason: "changed my mind" })).rejects.toBeInstanceOf(InvalidStateError);
    expect(await closing(open.id)).toHaveLength(1);
  });

  it("a running call's key is released only with force, and the trail says it was forced", async () => {
    const scope = `force-${randomUUID().slice(0, 8)}`;
    let finish!: () => void;
    const gate = new Promise<void>((r) => (finish = r));
    const running = engine.invoke(charge, async () => {
      await gate;
      return { body: { chargeId: "ch_late" } };
    }, { scope, key: "k", args: registry.parseArgs(charge, { customerId: "c", amountCents: 1, currency: "EUR" }) });
    await new Promise((r) => setTimeout(r, 50));
    await expect(releaseKey(runtime(), { scope, key: "k", actor: operator, reason: "looks stuck" })).rejects.toThrow(/still running/);
    await releaseKey(runtime(), { scope, key: "k", actor: operator, reason: "looks stuck", force: true });
    expect(await t.store.get(scope, "k")).toBeNull();
    finish();
    await running;
    const [release] = await t.db.prisma.operatorAction.findMany({ where: { scope, key: "k", action: "release" } });
    expect(release.stateAfter).toEqual({ state: "absent", forced: true });
  });
});
