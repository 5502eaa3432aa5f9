import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { demoTools } from "@/lib/tools/demo";
import { ToolRegistry } from "@/lib/tools/registry";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { installTestRuntime } from "@/test/support/runtime";
import { listKeys } from "./list-keys";

// The keys list shows what each done key answers with: a declined card is done with a 402, not a
// success; and how many duplicates each key answered.
describe("the keys list: each key's stored status and replays", () => {
  let pg: TestPostgres;
  let runtime: Runtime;
  const SCOPE = "facts";

  async function charge(key: string, outcome?: string) {
    const tool = runtime.registry.get("payments.charge");
    const args = runtime.registry.parseArgs(tool, { customerId: "cus_1", amountCents: 500, currency: "EUR", ...(outcome ? { simulate: { outcome } } : {}) });
    return runtime.engine.invoke(tool, runtime.registry.runnerFor(tool, runtime.db.prisma), { scope: SCOPE, key, args });
  }

  beforeAll(async () => {
    pg = await createTestPostgres("key_list_facts");
    runtime = installTestRuntime({ db: pg.db, store: new SqlKeyStore(pg.db), registry: new ToolRegistry([...demoTools]) });
    await charge("paid");
    await charge("declined", "decline");
    await charge("declined", "decline");
    await charge("declined", "decline");
    await runtime.audit.flush();
  }, 120_000);

  afterAll(async () => {
    await runtime?.close();
    await pg?.drop();
  });

  it("a declined charge is listed with its 402 and two replays; a paid one with 200 and none", async () => {
    const page = await listKeys(runtime, { scope: SCOPE, limit: 50 });
    const byKey = Object.fromEntries(page.items.map((k) => [k.key, k]));
    expect(byKey.declined).toMatchObject({ state: "done", resultStatus: 402, replays: 2 });
    expect(byKey.paid).toMatchObject({ state: "done", resultStatus: 200, replays: 0 });
  });
});
