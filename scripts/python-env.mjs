// The Python client's development environment: a virtualenv at clients/python/.venv with the tools
// and framework packages pinned in clients/python/requirements-dev.txt (and the client itself,
// editable). `node scripts/python-env.mjs` creates it, or refreshes it when the requirements file
// (or the Python it was made with) changed since the last install: a stamp in the venv holds their
// hash, so an unchanged environment costs one file read. Processes that provision at the same time
// (the python stage and the fault suite of one `npm test`) take turns through a lock directory.
//
// pip installs from PIP_INDEX_URL / PIP_EXTRA_INDEX_URL when set, else from the machine's local
// mirror (file:///opt/pypi/simple and file:///opt/pypi-more/simple) when it exists, else from pip's
// own configuration. Anything missing fails loudly: nothing here is skipped.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const CLIENT_DIR = path.join(ROOT, "clients", "python");
export const VENV = path.join(CLIENT_DIR, ".venv");
const REQUIREMENTS = path.join(CLIENT_DIR, "requirements-dev.txt");
const STAMP = path.join(VENV, ".requirements.sha256");
const LOCK = `${VENV}.lock`;
const BASE_PYTHON = process.env.PYTHON ?? "python3";
const LOCAL_INDEX = ["/opt/pypi/simple", "/opt/pypi-more/simple"];

/** the venv's interpreter */
export const PYTHON = path.join(VENV, "bin", "python");

function run(command, args, { quiet = false, env } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
    let output = "";
    const take = (stream) => (d) => {
      output += d;
      if (!quiet) stream.write(d);
    };
    child.stdout.on("data", take(process.stdout));
    child.stderr.on("data", take(process.stderr));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve(output) : reject(new Error(`${command} ${args.join(" ")} exited ${code}\n${output}`))));
  });
}

function indexArgs() {
  if (process.env.PIP_INDEX_URL) return [];
  const local = LOCAL_INDEX.filter((dir) => existsSync(dir));
  if (local.length === 0) return [];
  const [first, ...rest] = local.map((dir) => `file://${dir}`);
  return ["--index-url", first, ...rest.flatMap((url) => ["--extra-index-url", url])];
}

async function wantedStamp() {
  const requirements = await readFile(REQUIREMENTS);
  const version = (await run(BASE_PYTHON, ["-c", "import sys; print(sys.version)"], { quiet: true })).trim();
  // the client is installed editable: its pyproject (metadata, build backend) counts too
  const pyproject = await readFile(path.join(CLIENT_DIR, "pyproject.toml"));
  return createHash("sha256").update(requirements).update("\0").update(pyproject).update("\0").update(version).digest("hex");
}

async function withLock(fn) {
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    try {
      await mkdir(LOCK);
      await writeFile(path.join(LOCK, "pid"), String(process.pid));
      break;
    } catch (err) {
      if (err.code !== "EEXIST") throw err;
      // a lock left by a process that is gone is taken over
      const holder = Number(await readFile(path.join(LOCK, "pid"), "utf8").catch(() => "0"));
      let alive = false;
      if (holder > 0) {
        try {
          process.kill(holder, 0);
          alive = true;
        } catch {
          alive = false;
        }
      }
      const age = await stat(LOCK).then((s) => Date.now() - s.mtimeMs, () => 0);
      if (!alive && age > 2_000) {
        await rm(LOCK, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`python-env: ${LOCK} is held by process ${holder}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    return await fn();
  } finally {
    await rm(LOCK, { recursive: true, force: true });
  }
}

/**
 * Makes clients/python/.venv match requirements-dev.txt; returns the venv's python.
 * `log` receives one line per step (nothing when the venv is current).
 */
export async function ensurePythonEnv({ log = (line) => console.log(line), quiet = false } = {}) {
  const wanted = await wantedStamp();
  const current = async () => existsSync(PYTHON) && (await readFile(STAMP, "utf8").catch(() => "")).trim() === wanted;
  if (await current()) return PYTHON;
  return withLock(async () => {
    if (await current()) return PYTHON;
    const started = Date.now();
    log(`python-env: provisioning ${path.relative(ROOT, VENV)} from ${path.relative(ROOT, REQUIREMENTS)}`);
    await rm(STAMP, { force: true });
    if (!existsSync(PYTHON)) await run(BASE_PYTHON, ["-m", "venv", VENV], { quiet });
    const pip = [PYTHON, "-m", "pip", "--disable-pip-version-check", "install", "--no-input", ...indexArgs()];
    await run(pip[0], [...pip.slice(1), "-r", REQUIREMENTS], { quiet });
    // the client itself, editable: tests import the working copy, installed as a user would
    await run(pip[0], [...pip.slice(1), "--no-deps", "--no-build-isolation", "-e", CLIENT_DIR], { quiet });
    await writeFile(STAMP, `${wanted}\n`);
    log(`python-env: ready in ${Math.round((Date.now() - started) / 1000)} s`);
    return PYTHON;
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const python = await ensurePythonEnv();
    console.log(`python-env: ${path.relative(ROOT, python)} is current`);
  } catch (err) {
    console.error(`python-env: ${err.message}`);
    process.exit(1);
  }
}
