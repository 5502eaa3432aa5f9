// `npm test`'s python stage: the Python client's checks with its own environment (see
// python-env.mjs): ruff, mypy --strict on the package, and pytest on clients/python/tests. The tests
// that need a live Idemgate (marked `live`) are deselected here by name, not skipped: the fault suite
// (test/faults/python-client.test.ts) runs them against production servers. A missing tool fails the
// stage.
import path from "node:path";
import { spawn } from "node:child_process";
import { CLIENT_DIR, ensurePythonEnv, ROOT, VENV } from "./python-env.mjs";

const python = await ensurePythonEnv().catch((err) => {
  console.error(`python: ${err.message}`);
  process.exit(1);
});

const steps = [
  ["ruff", [python, "-m", "ruff", "check", CLIENT_DIR]],
  ["mypy", [python, "-m", "mypy", "--strict", path.join(CLIENT_DIR, "idemgate")]],
  ["pytest", [python, "-m", "pytest", "-m", "not live", "-p", "no:cacheprovider", path.join(CLIENT_DIR, "tests")]],
];

let failed = 0;
for (const [name, [command, ...args]] of steps) {
  console.log(`\n── ${name}: ${path.relative(ROOT, command)} ${args.map((a) => (a.startsWith(ROOT) ? path.relative(ROOT, a) : a)).join(" ")}`);
  const code = await new Promise((resolve) => {
    const child = spawn(command, args, { cwd: CLIENT_DIR, stdio: "inherit", env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1", VIRTUAL_ENV: VENV } });
    child.on("error", (err) => {
      console.error(`${name}: ${err.message}`);
      resolve(127);
    });
    child.on("close", (c) => resolve(c ?? 1));
  });
  if (code !== 0) {
    failed++;
    console.log(`${name}: FAILED (exit ${code})`);
  }
}
console.log(`\npython: ${failed === 0 ? "ruff, mypy and pytest passed" : `${failed} of ${steps.length} checks failed`}`);
process.exit(failed === 0 ? 0 : 1);
