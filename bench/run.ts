import os from "node:os";
import { benchClient } from "./client-bench";
import { benchConsole } from "./console-bench";
import { compare } from "./compare";
import { benchEngine } from "./engine-bench";
import { benchGateway } from "./gateway-bench";
import { benchPeers } from "./peers-bench";
import { benchPython } from "./python-bench";
import { benchSearch } from "./search-bench";
import { printTable, type Row } from "./stats";
import { testPort } from "@/scripts/test-ports.mjs";

/*
 * npm run bench [-- --quick] [-- --scale 1000000] [-- --audit-scale 10000000] [-- --only engine,peers,gateway,client,python,console,search] [-- --search-scale 1000000] [-- --no-build]
 * Prints one Markdown table; every figure is a median over repeated runs and every ratio is against
 * a baseline measured in the same run on the same Redis and PostgreSQL.
 *   --scale N    keys (and audit rows) of the large console dataset; default 100000 (quick 20000)
 *   --audit-scale N  also time the tool pages and the tool list on a PostgreSQL-only dataset of N audit
 *                rows (10000000 takes several minutes to seed, so it is off by default)
 *   --search-scale N  executions (with kept arguments) for the search by argument value; default 1000000 (quick 100000)
 *   --no-build   serve the existing .next build instead of running `next build` first
 *   --compare REF  a quick bench of commit REF (a temporary worktree) and of this tree in one run,
 *                side by side with their ratios (bench/compare.ts; --only defaults to engine,peers,
 *                --rounds N per tree, --full for full-length runs)
 */
const argv = process.argv.slice(2);
const quick = argv.includes("--quick");
const option = (name: string) => {
  const at = argv.indexOf(`--${name}`);
  return at === -1 ? undefined : argv[at + 1];
};
const scale = Number(option("scale") ?? (quick ? 20_000 : 100_000));
const auditScale = option("audit-scale") === undefined ? undefined : Number(option("audit-scale"));
const searchScale = Number(option("search-scale") ?? (quick ? 100_000 : 1_000_000));
// The servers' ports, like the e2e and fault suites', are moved by IDEMGATE_TEST_PORT_BASE
// (scripts/test-ports.mjs), so that checkouts benchmarking side by side do not answer each other's calls.
const only = new Set((option("only") ?? "engine,peers,gateway,client,python,console,search").split(","));

async function section(name: string, fn: () => Promise<Row[]>): Promise<Row[]> {
  if (!only.has(name)) return [];
  const t0 = performance.now();
  try {
    const rows = await fn();
    console.error(`bench: ${name} done in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    return rows;
  } catch (err) {
    console.error(`bench: ${name} failed`, err);
    const message = (err instanceof Error ? err.message : String(err)).split("\n")[0].slice(0, 300);
    return [{ section: name, name: "section failed", value: NaN, unit: "", note: message }];
  }
}

async function main(): Promise<void> {
  const started = performance.now();
  console.log(`# Idemgate benchmarks — ${new Date().toISOString()}`);
  console.log(`node ${process.version}, ${os.cpus().length} CPUs, ${quick ? "quick run" : "full run"}; console datasets: 10k and ${scale} keys`);
  const rows: Row[] = [
    ...(await section("engine", () => benchEngine({ iterations: quick ? 300 : 2_000, rounds: quick ? 3 : 7 }))),
    ...(await section("peers", () => benchPeers({ calls: quick ? 2_000 : 5_000, concurrency: 50, rounds: quick ? 3 : 5 }))),
    ...(await section("gateway", () =>
      benchGateway({
        durationS: quick ? 3 : 10,
        connections: 50,
        rounds: 3,
        build: !argv.includes("--no-build"),
        port: testPort(3141),
        barePort: testPort(3142),
        engineCalls: quick ? 2_000 : 5_000,
        userCalls: { one: quick ? 300 : 1_000, many: quick ? 2_000 : 5_000 },
      }),
    )),
    ...(await section("client", () =>
      benchClient({ calls: { one: quick ? 300 : 1_000, many: quick ? 2_000 : 5_000 }, rounds: 3, build: !argv.includes("--no-build"), port: testPort(3143) }),
    )),
    ...(await section("python", () => benchPython({ calls: quick ? 200 : 500, rounds: 3, build: !argv.includes("--no-build") && !only.has("gateway") && !only.has("client"), port: testPort(3144) }))),
    ...(await section("console", () => benchConsole({ small: 10_000, large: scale, repeats: quick ? 20 : 50, auditLarge: auditScale }))),
    ...(await section("search", () => benchSearch({ executions: searchScale, repeats: quick ? 50 : 200, quick: searchScale < 1_000_000 }))),
  ];
  printTable("Results", rows);
  console.log(`\ntotal ${((performance.now() - started) / 1000).toFixed(0)} s`);
}

(argv.includes("--compare") ? compare(argv) : main()).then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
