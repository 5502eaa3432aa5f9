import { randomUUID } from "node:crypto";
import pg from "pg";
import { openDatabase } from "@/lib/db/database";
import { search } from "@/lib/operator/search";
import type { Runtime } from "@/lib/server/runtime";
import { SqlKeyStore } from "@/lib/store/sql/sql-key-store";
import { POSTGRES_ADMIN_URL } from "@/test/support/databases";
import { quantile, type Row } from "./stats";

export interface SearchOptions {
  /** executions seeded, each with kept arguments */
  executions: number;
  repeats: number;
  /** --quick: fewer rows than the 1M the target is set at, said in each row */
  quick: boolean;
}

const CUSTOMERS = 100_000; // ten calls per customer at 1M executions

/**
 * The console search by an argument value at scale (issue 24: p95 < 150 ms at 1M executions): one
 * database of its own, executions seeded with kept arguments by INSERT … SELECT generate_series,
 * their copies in execution_argument_index (as the audit writer writes them after each intent), its
 * two GIN indexes (jsonb_path_ops) built after the seed as a migration on a full table would, and
 * the database dropped afterwards.
 */
export async function benchSearch(options: SearchOptions): Promise<Row[]> {
  const database = `idemgate_bench_search_${randomUUID().slice(0, 8)}`;
  const admin = async (sql: string) => {
    const c = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
    await c.connect();
    await c.query(sql).finally(() => c.end());
  };
  await admin(`CREATE DATABASE "${database}"`);
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${database}`;
  const db = await openDatabase({ url: url.toString() }).catch(async (err) => {
    await admin(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
    throw err;
  });
  try {
    const n = options.executions;
    const t0 = performance.now();
    await db.execute(`DROP INDEX execution_argument_index_path_ops_idx`, []);
    await db.execute(`DROP INDEX execution_argument_index_values_idx`, []);
    // the tool-stats triggers are not what is measured here
    await db.execute(`ALTER TABLE executions DISABLE TRIGGER USER`, []);
    await db.execute(
      `INSERT INTO executions (id, scope, key, tool, fingerprint, token, started_at, lease_until, outcome, finished_at, arguments, arguments_kept)
       SELECT 'x-' || i, 'scope-' || (i % 10), 'order-' || i || ':charge', (ARRAY['payments.charge','billing.create_invoice','email.send'])[i % 3 + 1],
         md5(i::text), 1, now() - make_interval(secs => i), now() - make_interval(secs => i) + interval '1 minute', 'succeeded', now() - make_interval(secs => i),
         jsonb_build_object('customerId', 'cus_' || (i % ${CUSTOMERS}), 'amountCents', (i::bigint * 7919) % 100000, 'currency', 'EUR',
           'memo', 'order ' || i, 'shipping', jsonb_build_object('zip', lpad((i % 99991)::text, 5, '0'), 'country', 'DE'),
           'card', jsonb_build_object('number', '[redacted]', 'exp', '12/30')),
         'redacted'
       FROM generate_series(0, ${n - 1}) AS i`,
      [],
    );
    await db.execute(
      `INSERT INTO execution_argument_index (execution_id, scope, started_at, arguments) SELECT id, scope, started_at, arguments FROM executions`,
      [],
    );
    const t1 = performance.now();
    await db.execute(`CREATE INDEX execution_argument_index_path_ops_idx ON execution_argument_index USING GIN (arguments jsonb_path_ops)`, []);
    await db.execute(
      `CREATE INDEX execution_argument_index_values_idx ON execution_argument_index USING GIN ((jsonb_path_query_array(arguments, '$.*')) jsonb_path_ops)`,
      [],
    );
    await db.execute(`ANALYZE executions`, []);
    await db.execute(`ANALYZE execution_argument_index`, []);
    const t2 = performance.now();
    const runtime = { db, store: new SqlKeyStore(db), config: { secret: "bench-search-cursor-secret-0123456789abcdef" } } as unknown as Pick<Runtime, "config" | "store" | "db">;
    let i = 0;
    const customer = () => `cus_${(i++ * 7_919) % CUSTOMERS}`;
    const queries: [string, () => string, string][] = [
      ["bare customer id (tried under every argument name seen)", customer, "10 executions match, 50 shown at most"],
      ["customerId:… (one containment)", () => `customerId:${customer()}`, "10 executions match"],
      ["shipping.zip:… (a nested value)", () => `shipping.zip:${String(i++ % 99_991).padStart(5, "0")}`, "about 10 match"],
      ["an execution id", () => `x-${(i++ * 104_729) % n}`, "by primary key; also a key prefix and arguments"],
      ["a value no call has", () => `cus_none_${i++}`, "nothing matches"],
    ];
    const at = n >= 1_000_000 ? `${n / 1_000_000}M` : `${n / 1_000}k`;
    const rows: Row[] = [];
    for (const [name, next, note] of queries) {
      for (let w = 0; w < 3; w++) await search(runtime, next());
      const times: number[] = [];
      for (let r = 0; r < options.repeats; r++) {
        const t = performance.now();
        await search(runtime, next());
        times.push(performance.now() - t);
      }
      rows.push({
        section: "search PostgreSQL",
        name: `search: ${name} @ ${at} executions`,
        value: quantile(times, 0.95),
        unit: "ms",
        p50: quantile(times, 0.5),
        tail: { label: "p95", ms: quantile(times, 0.95) },
        target: "p95 < 150 ms at 1M",
        note: `${note}; ${options.repeats} searches${options.quick ? `; quick run: ${at} executions, not 1M` : ""}`,
      });
    }
    rows.push({
      section: "search seed",
      name: `seed ${at} executions with kept arguments and their copies, then build the two GIN indexes`,
      value: (t2 - t0) / 1000,
      unit: "s",
      note: `INSERT … SELECT generate_series, and the copies, ${((t1 - t0) / 1000).toFixed(1)} s, CREATE INDEX (jsonb_path_ops) × 2 + ANALYZE ${((t2 - t1) / 1000).toFixed(1)} s`,
    });
    return rows;
  } finally {
    await db.close();
    await admin(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
  }
}
