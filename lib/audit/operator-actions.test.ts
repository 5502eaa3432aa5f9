import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "@/lib/db/database";
import { createTestPglite, createTestPostgres } from "@/test/support/databases";
import { parseAuditTrailFilters, type AuditTrailFilters } from "./audit-trail-filters";
import { listOperatorActions } from "./operator-actions";

const DAY = 86_400_000;
const T0 = Date.UTC(2026, 2, 1, 12, 0, 0);

/**
 * 60 rows over six days (2026-03-01 … 03-06), ten a day, with two actors, three actions and three
 * keys, so that each filter alone keeps rows the others drop.
 */
function seedRows() {
  return Array.from({ length: 60 }, (_, i) => ({
    id: `row-${String(i).padStart(3, "0")}`,
    actor: i % 2 === 0 ? "ana@example.com" : "bo@example.com",
    action: ["release", "invoke", "token_create"][i % 3],
    scope: i % 5 === 0 ? "acme" : "globex",
    key: `key-${i % 4}`,
    anomalyId: i % 10 === 3 ? "anomaly-1" : null,
    reason: "seeded",
    at: new Date(T0 + Math.floor(i / 10) * DAY + (i % 10) * 60_000),
  }));
}
type Row = ReturnType<typeof seedRows>[number];

function filters(raw: Record<string, string>): AuditTrailFilters {
  const parsed = parseAuditTrailFilters(raw);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return parsed.filters;
}

/** Every page of a filtered list, following the cursor. */
async function allPages(db: Database, f: AuditTrailFilters, limit: number) {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 100; pages++) {
    const page = await listOperatorActions(db.prisma, { ...f, limit, cursor });
    expect(page.items.length).toBeLessThanOrEqual(limit);
    ids.push(...page.items.map((r) => r.id));
    if (!page.nextCursor) return ids;
    cursor = page.nextCursor;
  }
  throw new Error("the cursor never ended");
}

const newestFirst = (rows: Row[]) => [...rows].sort((a, b) => b.at.getTime() - a.at.getTime() || (a.id < b.id ? 1 : -1)).map((r) => r.id);

const stores: [string, () => Promise<{ db: Database; drop: () => Promise<void> }>][] = [
  ["PostgreSQL", () => createTestPostgres("audit_filters")],
  ["PGlite", createTestPglite],
];

describe.each(stores)("the audit trail's filters on %s", (_name, open) => {
  let t: { db: Database; drop: () => Promise<void> };
  const rows = seedRows();

  beforeAll(async () => {
    t = await open();
    await t.db.prisma.operatorAction.createMany({ data: rows });
  }, 60_000);
  afterAll(async () => {
    await t?.drop();
  });

  it("applies date range, actor, action and target at once, through every page", async () => {
    const f = filters({ from: "2026-03-02", to: "2026-03-05", actor: "ana@example.com", action: "release", target: "key-2" });
    const expected = newestFirst(
      rows.filter(
        (r) =>
          r.at >= new Date("2026-03-02T00:00:00Z") && r.at < new Date("2026-03-06T00:00:00Z") && r.actor === "ana@example.com" && r.action === "release" && r.key === "key-2",
      ),
    );
    expect(expected.length).toBeGreaterThan(1);
    expect(await allPages(t.db, f, 1)).toEqual(expected);
  });

  it("keeps the cursor inside the filters: no row is skipped or repeated across pages", async () => {
    const f = filters({ from: "2026-03-03", actor: "bo@example.com" });
    const expected = newestFirst(rows.filter((r) => r.at >= new Date("2026-03-03T00:00:00Z") && r.actor === "bo@example.com"));
    expect(expected).toHaveLength(20);
    expect(await allPages(t.db, f, 3)).toEqual(expected);
  });

  it("matches a target by key, by scope or by anomaly", async () => {
    expect(await allPages(t.db, filters({ target: "acme" }), 50)).toEqual(newestFirst(rows.filter((r) => r.scope === "acme")));
    expect(await allPages(t.db, filters({ target: "anomaly-1" }), 50)).toEqual(newestFirst(rows.filter((r) => r.anomalyId === "anomaly-1")));
    expect(await allPages(t.db, filters({ target: "key-1", to: "2026-03-01" }), 50)).toEqual(
      newestFirst(rows.filter((r) => r.key === "key-1" && r.at < new Date("2026-03-02T00:00:00Z"))),
    );
  });

  it("takes an instant as a bound: from inclusive, to exclusive", async () => {
    const f = filters({ from: "2026-03-02T12:02:00Z", to: "2026-03-02T12:05:00Z" });
    expect(await allPages(t.db, f, 50)).toEqual(["row-014", "row-013", "row-012"]);
  });
});

describe("bad filter values", () => {
  it.each([
    [{ from: "2026-13-01" }, "from"],
    [{ from: "2026-02-30" }, "from"],
    [{ to: "yesterday" }, "to"],
    [{ action: "delete_everything" }, "action"],
    [{ from: "2026-03-05", to: "2026-03-01" }, "to"],
  ])("%j is refused, naming %s", (raw, field) => {
    const parsed = parseAuditTrailFilters(raw);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.problems.map((p) => p.field)).toContain(field);
  });

  it("empty values are no filter", () => {
    expect(parseAuditTrailFilters({ from: "", actor: " ", action: "" })).toEqual({ ok: true, filters: {} });
  });
});
