// `npm test`: every check the project has, the independent ones side by side.
//
//   typecheck
//   layout
//   python                  (the Python client: ruff, mypy --strict, pytest, in its own venv; the
//                            fault suite's Python tests provision the same venv, taking turns by a lock)
//   unit ──────┐            (vitest against the real PostgreSQL and Redis)
//   build ─────┼─ e2e       (Playwright in Chromium against the production build)
//              └─ faults    (killed processes, lost stores, against the production build)
//
// Much of the suite waits on servers, browsers and leases rather than on the CPU, so stages
// overlap; each one's data is its own (random databases and Redis prefixes, distinct ports from
// scripts/test-ports.mjs). Each stage writes its whole output to test-logs/<stage>.log;
// this runner prints a line as each starts and ends, then each stage's summary (the end of the log
// of a stage that failed, where its runner reports the failures). The run fails when any stage
// fails; a stage whose prerequisite failed is not started. `--only unit,e2e` runs a subset (with the
// stages they need); `--serial` runs one stage at a time, in the order above.
import { spawn } from "node:child_process";
import { createWriteStream, existsSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import { constants } from "node:os";
import path from "node:path";
import { ROOT } from "./build-if-stale.mjs";

const node = process.execPath;
const bin = (pkg, file) => path.join(ROOT, "node_modules", pkg, file);

/** name → command, and the stages that must have passed first */
const STAGES = [
  { name: "typecheck", args: [bin("typescript", "bin/tsc"), "--noEmit", "-p", "tsconfig.typecheck.json"] },
  { name: "layout", args: ["scripts/check-layout.mjs"] },
  { name: "python", args: ["scripts/python-check.mjs"] },
  { name: "unit", args: [bin("vitest", "vitest.mjs"), "run"] },
  { name: "build", args: ["scripts/build-if-stale.mjs"] },
  // after the unit tests: many of those are about timing within one process, and with all of the
  // suite on two cores at once they were starved into failing; e2e and faults side by side are not
  { name: "e2e", args: ["scripts/e2e.mjs"], after: ["build", "unit"] },
  { name: "faults", args: ["scripts/faults.mjs"], after: ["build", "unit"] },
];
// how many lines of a passing stage's log end up in the summary
// how much of a failed stage's log is printed (the rest is in its file)
const FAILED_LINES = 250;
const SUMMARY_LINES = { typecheck: 3, layout: 3, python: 4, unit: 8, build: 4, e2e: 4, faults: 8 };

function parseArgs(argv) {
  const options = { only: null, serial: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--serial") options.serial = true;
    else if (arg === "--only" || arg.startsWith("--only=")) {
      const value = arg === "--only" ? argv[++i] : arg.slice("--only=".length);
      options.only = new Set((value ?? "").split(",").filter(Boolean));
      const unknown = [...options.only].filter((n) => !STAGES.some((s) => s.name === n));
      if (unknown.length > 0 || options.only.size === 0) usage(`unknown stage ${unknown.join(", ") || "(none given)"}`);
    } else usage(`unknown argument ${arg}`);
  }
  return options;
}

function usage(problem) {
  console.error(`npm test: ${problem}\nusage: npm test [-- --only ${STAGES.map((s) => s.name).join(",")}] [--serial]`);
  process.exit(2);
}

/** The stages to run: those asked for and everything they need. */
function selected(only) {
  if (!only) return STAGES;
  const wanted = new Set();
  const add = (name) => {
    if (wanted.has(name)) return;
    wanted.add(name);
    for (const dep of STAGES.find((s) => s.name === name).after ?? []) add(dep);
  };
  for (const name of only) add(name);
  return STAGES.filter((s) => wanted.has(s.name));
}

const seconds = (ms) => `${(ms / 1000).toFixed(0)} s`;
const stamp = (startedAt) => `[${String(Math.round((Date.now() - startedAt) / 1000)).padStart(4)} s]`;

const running = new Set();

const TIME = existsSync("/usr/bin/time") ? "/usr/bin/time" : null;

/** user + system CPU milliseconds from GNU time's "%U %S" file, or null */
async function cpuOf(file) {
  try {
    const [user, sys] = (await readFile(file, "utf8")).trim().split(/\s+/).slice(-2).map(Number);
    return Number.isFinite(user + sys) ? (user + sys) * 1000 : null;
  } catch {
    return null;
  }
}

function runStage(stage, logDir, runStartedAt) {
  const logFile = path.join(logDir, `${stage.name}.log`);
  const log = createWriteStream(logFile);
  const startedAt = Date.now();
  console.log(`${stamp(runStartedAt)} ▶ ${stage.name}`);
  return new Promise((resolve) => {
    // its own process group, so that an interrupted run stops the servers and browsers it started too
    // GNU time, where the machine has it, writes the stage's CPU time (its own and its children's
    // that were waited for) to a file of its own: the summary line names it beside the wall time
    const cpuFile = path.join(logDir, `${stage.name}.cpu`);
    const [command, args] = TIME ? [TIME, ["-q", "-f", "%U %S", "-o", cpuFile, node, ...stage.args]] : [node, stage.args];
    const child = spawn(command, args, {
      cwd: ROOT,
      env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1", NO_COLOR: "1", FORCE_COLOR: undefined },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    running.add(child);
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    const finish = (code) => {
      running.delete(child);
      log.end(async () => resolve({ stage, code, ms: Date.now() - startedAt, logFile, cpuMs: TIME ? await cpuOf(cpuFile) : null }));
    };
    child.on("error", (err) => {
      log.write(`\ncould not start: ${err.message}\n`);
      finish(127);
    });
    child.on("close", (code, signal) => {
      const exit = code ?? 128 + (constants.signals[signal] ?? 0);
      console.log(`${stamp(runStartedAt)} ${exit === 0 ? "✓" : "✗"} ${stage.name} (${seconds(Date.now() - startedAt)}${exit === 0 ? "" : `, exit ${exit}`})`);
      finish(exit);
    });
  });
}

function stopAll(signal) {
  for (const child of running) {
    try {
      process.kill(-child.pid, signal);
    } catch {
      // already gone
    }
  }
}

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    console.error(`\nnpm test: ${signal}, stopping every stage`);
    stopAll("SIGTERM");
    setTimeout(() => {
      stopAll("SIGKILL");
      process.exit(128 + constants.signals[signal]);
    }, 5_000).unref();
  });
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const stages = selected(options.only);
  // not under test-results/, which Playwright empties when it starts
  const logDir = path.join(ROOT, "test-logs");
  await mkdir(logDir, { recursive: true });
  const runStartedAt = Date.now();
  console.log(`npm test: ${stages.map((s) => s.name).join(", ")}${options.serial ? " (one at a time)" : ""}; logs in ${path.relative(ROOT, logDir)}/`);

  const results = new Map();
  const start = (stage) =>
    runStage(stage, logDir, runStartedAt).then((result) => {
      results.set(stage.name, result);
      return result;
    });
  const ready = (stage) => (stage.after ?? []).every((dep) => results.get(dep)?.code === 0 || !stages.some((s) => s.name === dep));
  const blocked = (stage) => (stage.after ?? []).some((dep) => results.has(dep) && results.get(dep).code !== 0);

  if (options.serial) {
    for (const stage of stages) {
      if (blocked(stage)) continue;
      await start(stage);
    }
  } else {
    // start whatever is ready; each end may make more ready
    const pending = new Set(stages);
    const inFlight = new Set();
    const launch = () => {
      for (const stage of [...pending]) {
        if (blocked(stage)) pending.delete(stage);
        else if (ready(stage)) {
          pending.delete(stage);
          const p = start(stage).then(() => inFlight.delete(p));
          inFlight.add(p);
        }
      }
    };
    launch();
    while (inFlight.size > 0) {
      await Promise.race(inFlight);
      launch();
    }
  }

  const wall = Date.now() - runStartedAt;
  let failed = 0;
  console.log("");
  for (const stage of stages) {
    const result = results.get(stage.name);
    if (!result) {
      console.log(`── ${stage.name}: not run (${(stage.after ?? []).filter((d) => results.get(d)?.code !== 0).join(", ")} failed)`);
      failed++;
      continue;
    }
    const text = (await readFile(result.logFile, "utf8")).trimEnd();
    const lines = text.split("\n");
    if (result.code === 0) {
      console.log(`── ${stage.name}: passed in ${seconds(result.ms)}`);
      console.log(lines.slice(-SUMMARY_LINES[stage.name]).join("\n"));
    } else {
      failed++;
      // the runners print their failures last
      const shown = lines.slice(-FAILED_LINES);
      const earlier = lines.length - shown.length;
      console.log(`── ${stage.name}: FAILED (exit ${result.code}) after ${seconds(result.ms)}; ${earlier > 0 ? `the last ${shown.length} lines of ` : ""}its log (${path.relative(ROOT, result.logFile)}):`);
      console.log(shown.join("\n"));
    }
    console.log("");
  }
  const timed = (r) => `${seconds(r.ms)}${r.cpuMs === null ? "" : ` (cpu ${seconds(r.cpuMs)})`}`;
  const line = stages.map((s) => `${s.name} ${results.has(s.name) ? timed(results.get(s.name)) : "—"}`).join(", ");
  console.log(`npm test: ${failed === 0 ? "passed" : `${failed} stage${failed === 1 ? "" : "s"} failed`} in ${seconds(wall)} (${line})`);
  process.exit(failed === 0 ? 0 : 1);
}

await main();
