import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestPostgres, type TestPostgres } from "@/test/support/databases";
import { ARGUMENT_MATCHES_READ, findExecutionsByArguments } from "./find-executions";

// How many calls a search by argument value counts (lib/operator/search.ts): up to
// ARGUMENT_MATCHES_READ, and "more than that" only when more do. Executions and the copies of
// their kept arguments written straight into the tables.
describe("the count of calls that hold a value", () => {
  let pg: TestPostgres;
  // executions with their copies, started a second apart (the newest n = 0)
  const copies = async (value: string, from: number, count: number) => {
    const rows = `FROM generate_series($2::int, $2::int + $3::int - 1) AS n`;
    await pg.db.query(
      `INSERT INTO executions (id, scope, key, tool, fingerprint, token, started_at, lease_until)
       SELECT $1 || n, 's', $1 || n, 'mail.send', 'f', n, now() - make_interval(secs => n), now() ${rows}`,
      [`${value}-`, from, count],
    );
    await pg.db.query(
      `INSERT INTO execution_argument_index (execution_id, scope, started_at, arguments)
       SELECT $1 || n, 's', now() - make_interval(secs => n), jsonb_build_object('campaign', $4::text) ${rows}`,
      [`${value}-`, from, count, value],
    );
  };
  const find = (value: string) => findExecutionsByArguments(pg.db, [JSON.stringify({ campaign: value })], "s", 50);

  beforeAll(async () => {
    pg = await createTestPostgres("find_executions");
  }, 60_000);
  afterAll(async () => {
    await pg?.drop();
  });

  it("counts exactly as many as hold it up to the limit, and says 'more' only beyond it", async () => {
    await copies("few", 0, 3);
    const few = await find("few");
    expect([few.found.map((f) => f.key), few.matches, few.capped]).toEqual([["few-0", "few-1", "few-2"], 3, false]);
    await copies("many", 0, ARGUMENT_MATCHES_READ);
    expect(await find("many")).toMatchObject({ matches: ARGUMENT_MATCHES_READ, capped: false });
    await copies("many", ARGUMENT_MATCHES_READ, 1);
    expect(await find("many")).toMatchObject({ matches: ARGUMENT_MATCHES_READ, capped: true });
    expect(await find("nobody")).toEqual({ found: [], matches: 0, capped: false });
  });
});
