import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InvalidStateError } from "@/lib/idempotency/errors";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { setAnomalyStatus } from "./anomalies";

describe("anomaly status: a fresh-key duplicate's verdict", () => {
  let t: TestPostgres;
  beforeAll(async () => {
    t = await createTestPostgres("anomaly_status");
  });
  afterAll(async () => {
    await t?.drop();
  });

  const seed = async (type: string) => {
    const id = randomUUID();
    const at = new Date();
    await t.db.prisma.anomaly.create({
      data: { id, type, dedupeKey: `${type}:${id}`, tool: "payments.charge", scope: "acme", key: `k-${id}`, status: "open", summary: "seeded", evidence: {}, detectedAt: at, updatedAt: at },
    });
    return id;
  };
  const trail = (id: string) => t.db.prisma.operatorAction.findMany({ where: { anomalyId: id }, orderBy: { at: "asc" } });

  it("resolving confirms a duplicate that got through; acknowledging says it was a genuine repeat; both in the trail", async () => {
    const duplicate = await seed("fresh_key_duplicate");
    const updated = await setAnomalyStatus(t.db.prisma, { id: duplicate, status: "resolved", actor: "ops@example.com", reason: "two charges in the PSP; refunded the second" });
    expect(updated.status).toBe("resolved");
    const [confirmed] = await trail(duplicate);
    expect(confirmed).toMatchObject({
      actor: "ops@example.com",
      action: "confirm_duplicate",
      reason: "two charges in the PSP; refunded the second",
      scope: "acme",
      stateBefore: { status: "open", type: "fresh_key_duplicate" },
      stateAfter: { status: "resolved", type: "fresh_key_duplicate", verdict: "duplicate" },
    });

    const repeat = await seed("fresh_key_duplicate");
    await setAnomalyStatus(t.db.prisma, { id: repeat, status: "acknowledged", actor: "ops@example.com", reason: "the customer ordered twice" });
    const [genuine] = await trail(repeat);
    expect(genuine).toMatchObject({ action: "confirm_genuine_repeat", stateAfter: { status: "acknowledged", verdict: "genuine_repeat" } });
    // a genuine repeat later found to be a duplicate after all; reopening says so too
    await setAnomalyStatus(t.db.prisma, { id: repeat, status: "resolved", actor: "ops@example.com", reason: "the customer says once" });
    await setAnomalyStatus(t.db.prisma, { id: repeat, status: "open", actor: "ops@example.com", reason: "not sure yet" });
    expect((await trail(repeat)).map((a) => a.action)).toEqual(["confirm_genuine_repeat", "confirm_duplicate", "reopen_anomaly"]);
  });

  it("other types keep their plain actions; a reason is required and a stale transition refused", async () => {
    const stale = await seed("stale_suppression");
    await setAnomalyStatus(t.db.prisma, { id: stale, status: "acknowledged", actor: "ops@example.com", reason: "looking" });
    await setAnomalyStatus(t.db.prisma, { id: stale, status: "resolved", actor: "ops@example.com", reason: "caller fixed" });
    const actions = await trail(stale);
    expect(actions.map((a) => a.action)).toEqual(["acknowledge_anomaly", "resolve_anomaly"]);
    expect(actions[1].stateAfter).toEqual({ status: "resolved", type: "stale_suppression" });

    const duplicate = await seed("fresh_key_duplicate");
    await expect(setAnomalyStatus(t.db.prisma, { id: duplicate, status: "resolved", actor: "ops@example.com", reason: "" })).rejects.toThrow(/reason is required/);
    await expect(setAnomalyStatus(t.db.prisma, { id: duplicate, status: "open", actor: "ops@example.com", reason: "again" })).rejects.toBeInstanceOf(InvalidStateError);
    expect(await trail(duplicate)).toEqual([]);
  });
});
