import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { errorResponse } from "@/lib/http/problem";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { createSavedView, deleteSavedView, listSavedViews, MAX_VIEWS_PER_PAGE, normaliseViewQuery, updateSavedView } from "./saved-views";

// Saved views (docs/operate.md § Saved views): a named filter of the Keys or Anomalies list per
// operator, in the audit database. Errors are read as the API answers them (errorResponse).

async function problemOf(promise: Promise<unknown>): Promise<{ status: number; type: string; errors?: { path: string }[] }> {
  const err = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, "the call was refused").not.toBeNull();
  const res = errorResponse(err);
  return { status: res.status, ...(JSON.parse(await res.text()) as { type: string; errors?: { path: string }[] }) };
}

describe("saved views", () => {
  let pg: TestPostgres;
  const ada = randomUUID();
  const bob = randomUUID();

  beforeAll(async () => {
    pg = await createTestPostgres("saved_views");
    for (const [id, email, role] of [
      [ada, "ada@example.com", "operator"],
      [bob, "bob@example.com", "viewer"],
    ]) {
      await pg.db.prisma.operator.create({ data: { id, email, role, passwordHash: "unused", createdAt: new Date() } });
    }
  }, 60_000);
  afterAll(() => pg?.drop());

  it("keeps only the page's own filter parameters, trimmed, in a fixed order, without cursors or defaults", () => {
    expect(normaliseViewQuery("keys", "?prefix=order-&after=abc&limit=50&state=stuck&cursor=xyz&tool=+payments.charge+&scope=")).toBe("state=stuck&tool=payments.charge&prefix=order-");
    expect(normaliseViewQuery("anomalies", "status=open&type=stale_suppression&state=stuck")).toBe("type=stale_suppression");
    expect(normaliseViewQuery("anomalies", "status=any&tool=mail.send")).toBe("status=any&tool=mail.send");
    expect(normaliseViewQuery("keys", "")).toBe("");
  });

  it("refuses a bad name, page or filter value with a 400 naming the field, and saves nothing", async () => {
    const { prisma } = pg.db;
    const cases: [unknown, string][] = [
      [{ page: "keys", name: "   ", query: "" }, "name"],
      [{ page: "keys", name: "x".repeat(81), query: "" }, "name"],
      [{ page: "keys", query: "state=stuck" }, "name"],
      [{ page: "audit", name: "elsewhere", query: "" }, "page"],
      [{ page: "keys", name: "typo", query: "state=stuk" }, "query.state"],
      [{ page: "anomalies", name: "typo", query: "type=orphan" }, "query.type"],
      [{ page: "keys", name: "long", query: `prefix=${"k".repeat(300)}` }, "query.prefix"],
      [{ page: "keys", name: "not text", query: 42 }, "query"],
    ];
    for (const [input, field] of cases) {
      const p = await problemOf(createSavedView(prisma, ada, input));
      expect(p, JSON.stringify(input)).toMatchObject({ status: 400, type: "/problems/invalid_arguments" });
      expect(p.errors?.map((e) => e.path)).toContain(field);
    }
    expect(await prisma.savedView.count()).toBe(0);
  });

  it("stores the trimmed name and the normalised filter, and lists the operator's views of one page by name", async () => {
    const { prisma } = pg.db;
    const stuck = await createSavedView(prisma, ada, { page: "keys", name: "  Stuck charges  ", query: "state=stuck&tool=payments.charge&after=c1" });
    expect(stuck).toMatchObject({ page: "keys", name: "Stuck charges", query: "state=stuck&tool=payments.charge" });
    await createSavedView(prisma, ada, { page: "keys", name: "all unknown", query: "state=unknown" });
    await createSavedView(prisma, ada, { page: "anomalies", name: "Stuck charges", query: "status=any" });
    expect((await listSavedViews(prisma, ada, "keys")).map((v) => v.name)).toEqual(["all unknown", "Stuck charges"]);
    expect((await listSavedViews(prisma, ada, "anomalies")).map((v) => [v.name, v.query])).toEqual([["Stuck charges", "status=any"]]);
  });

  it("refuses a second view of the same name on the same page with 409, on create and on rename", async () => {
    const { prisma } = pg.db;
    expect(await problemOf(createSavedView(prisma, ada, { page: "keys", name: "Stuck charges ", query: "" }))).toMatchObject({ status: 409, type: "/problems/name_taken" });
    const other = (await listSavedViews(prisma, ada, "keys")).find((v) => v.name === "all unknown")!;
    expect(await problemOf(updateSavedView(prisma, ada, other.id, { name: "Stuck charges" }))).toMatchObject({ status: 409, type: "/problems/name_taken" });
    expect((await listSavedViews(prisma, ada, "keys")).map((v) => v.name)).toEqual(["all unknown", "Stuck charges"]);
  });

  it("renames a view and replaces its filter, normalised for its page", async () => {
    const { prisma } = pg.db;
    const v = (await listSavedViews(prisma, ada, "keys")).find((x) => x.name === "all unknown")!;
    const updated = await updateSavedView(prisma, ada, v.id, { name: "Unknown outcomes", query: "?state=unknown&scope=tenant-a&cursor=zz" });
    expect(updated).toMatchObject({ id: v.id, name: "Unknown outcomes", query: "state=unknown&scope=tenant-a" });
    expect(await problemOf(updateSavedView(prisma, ada, v.id, {}))).toMatchObject({ status: 400 });
    expect(await problemOf(updateSavedView(prisma, ada, v.id, { query: "state=gone" }))).toMatchObject({ status: 400, errors: [{ path: "query.state" }] });
    expect((await listSavedViews(prisma, ada, "keys")).find((x) => x.id === v.id)?.query).toBe("state=unknown&scope=tenant-a");
  });

  it("keeps each operator's views to themselves: another's id is 404 and changes nothing", async () => {
    const { prisma } = pg.db;
    expect(await listSavedViews(prisma, bob, "keys")).toEqual([]);
    // the same name is free for another operator
    const bobs = await createSavedView(prisma, bob, { page: "keys", name: "Stuck charges", query: "state=stuck" });
    const adas = (await listSavedViews(prisma, ada, "keys"))[0];
    expect(await problemOf(updateSavedView(prisma, bob, adas.id, { name: "mine now" }))).toMatchObject({ status: 404, type: "/problems/not_found" });
    expect(await problemOf(deleteSavedView(prisma, bob, adas.id))).toMatchObject({ status: 404 });
    expect(await problemOf(deleteSavedView(prisma, ada, bobs.id))).toMatchObject({ status: 404 });
    expect((await listSavedViews(prisma, ada, "keys")).map((v) => v.id)).toContain(adas.id);
    expect((await listSavedViews(prisma, bob, "keys")).map((v) => v.name)).toEqual(["Stuck charges"]);
    await deleteSavedView(prisma, ada, adas.id);
    expect((await listSavedViews(prisma, ada, "keys")).map((v) => v.id)).not.toContain(adas.id);
    expect(await problemOf(deleteSavedView(prisma, ada, adas.id))).toMatchObject({ status: 404 });
  });

  it(`keeps at most ${MAX_VIEWS_PER_PAGE} views per operator and page, even when they are saved at once`, async () => {
    const { prisma } = pg.db;
    const start = (await listSavedViews(prisma, bob, "anomalies")).length;
    const attempts = await Promise.allSettled(
      Array.from({ length: MAX_VIEWS_PER_PAGE + 5 - start }, (_, i) => createSavedView(prisma, bob, { page: "anomalies", name: `view ${i}`, query: "status=resolved" })),
    );
    // saves at once wait for each other (on a busy machine some wait past the transaction's start
    // bound and fail, which is no harm): never more than the cap gets through
    const saved = attempts.filter((a) => a.status === "fulfilled").length;
    expect(start + saved).toBeLessThanOrEqual(MAX_VIEWS_PER_PAGE);
    expect(await listSavedViews(prisma, bob, "anomalies")).toHaveLength(start + saved);
    // then one at a time up to the cap
    for (let i = start + saved; i < MAX_VIEWS_PER_PAGE; i++) await createSavedView(prisma, bob, { page: "anomalies", name: `later ${i}`, query: "" });
    expect(await listSavedViews(prisma, bob, "anomalies")).toHaveLength(MAX_VIEWS_PER_PAGE);
    expect(await problemOf(createSavedView(prisma, bob, { page: "anomalies", name: "one more", query: "" }))).toMatchObject({ status: 409, type: "/problems/limit_reached" });
    // the cap is per page and per operator
    await createSavedView(prisma, bob, { page: "keys", name: "still room here", query: "" });
    await createSavedView(prisma, ada, { page: "anomalies", name: "and here", query: "" });
  });
});
