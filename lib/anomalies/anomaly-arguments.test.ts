import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { getAnomaly } from "./anomalies";

describe("an anomaly's evidence with the arguments of the calls it names", () => {
  let pg: TestPostgres;
  beforeAll(async () => {
    pg = await createTestPostgres("anomaly_arguments");
  });
  afterAll(() => pg?.drop());

  const execution = (scope: string, args: unknown) => ({
    id: randomUUID(), scope, key: randomUUID(), tool: "psp.charge", fingerprint: "f", token: 1n, startedAt: new Date(), leaseUntil: new Date(),
    arguments: args as object, argumentsKept: "redacted",
  });
  const anomaly = (type: string, scope: string, evidence: object) => ({
    id: randomUUID(), type, dedupeKey: randomUUID(), tool: "psp.charge", scope, key: "k", summary: "s", evidence, detectedAt: new Date(), updatedAt: new Date(),
  });

  it("reads them from the audit log by the evidence's executions, per type, in the anomaly's scope only", async () => {
    const call = execution("acme", { customerId: "cus_1", card: "[redacted]" });
    const original = execution("acme", { customerId: "cus_2" });
    const duplicate = execution("acme", { customerId: "cus_2" });
    const elsewhere = execution("globex", { customerId: "cus_of_globex" });
    await pg.db.prisma.execution.createMany({ data: [call, original, duplicate, elsewhere] });
    const orphan = anomaly("orphan_unknown_outcome", "acme", { executionId: call.id });
    const fresh = anomaly("fresh_key_duplicate", "acme", { original: { executionId: original.id }, duplicate: { executionId: duplicate.id } });
    const stale = anomaly("stale_suppression", "acme", { originalExecutionId: original.id });
    const crossed = anomaly("orphan_unknown_outcome", "acme", { executionId: elsewhere.id });
    await pg.db.prisma.anomaly.createMany({ data: [orphan, fresh, stale, crossed] });

    expect((await getAnomaly(pg.db.prisma, orphan.id)).arguments).toEqual([{ role: "call", executionId: call.id, value: { customerId: "cus_1", card: "[redacted]" }, kept: "redacted" }]);
    expect((await getAnomaly(pg.db.prisma, fresh.id)).arguments.map((a) => [a.role, a.executionId])).toEqual([["original", original.id], ["duplicate", duplicate.id]]);
    expect((await getAnomaly(pg.db.prisma, stale.id)).arguments).toMatchObject([{ role: "original", value: { customerId: "cus_2" } }]);
    // an execution of another scope is never shown, whatever the evidence names
    expect((await getAnomaly(pg.db.prisma, crossed.id)).arguments).toEqual([]);
  });
});
