import { benchEngine, printEngine } from "./engine-bench";

// npm run bench [-- --quick]: prints each table as Markdown; every ratio is against a baseline
// measured in the same run on the same servers.
const quick = process.argv.includes("--quick");

async function main(): Promise<void> {
  console.log(`# Idemgate benchmarks — ${new Date().toISOString()}`);
  console.log(`node ${process.version}, ${quick ? "quick run" : "full run"}`);
  printEngine(await benchEngine({ iterations: quick ? 300 : 2_000, rounds: quick ? 3 : 7 }));
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
