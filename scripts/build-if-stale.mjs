// Shared by scripts/start.mjs and scripts/e2e.mjs: build the app only when the sources changed.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { constants } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const NEXT_BIN = path.join(ROOT, "node_modules", "next", "dist", "bin", "next");

const SOURCE_DIRS = ["app", "components", "lib", "prisma"];
const SOURCE_FILES = [
  "instrumentation.ts",
  "next.config.ts",
  "postcss.config.mjs",
  "tsconfig.json",
  "package.json",
  "package-lock.json",
];
// dist/ is what `npm pack` builds of lib/client for its tarball, not a source of the app
const SKIP = new Set(["node_modules", ".next", ".data", ".git", "dist"]);
// and the tarball `npm pack` leaves beside lib/client's package.json (idemgate-client-0.1.0.tgz)
const isArtifact = (name) => name.endsWith(".tgz");

/**
 * The newest modification time (ms) of any file under `dir` (or of `dir` itself when it is a file;
 * 0 when it does not exist); a cheap walk, no hashing. bin/idemgate.mjs judges its CLI bundle by it.
 */
export function newestMtimeMs(dir) {
  const stat = statSync(dir, { throwIfNoEntry: false });
  if (stat?.isFile()) return stat.mtimeMs;
  let newest = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const entry of entries) {
    if (SKIP.has(entry.name) || (entry.isFile() && isArtifact(entry.name))) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtimeMs(full));
    else if (entry.isFile()) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

/** Why a build is needed, or null when `.next/BUILD_ID` is newer than every source file. */
export function staleReason(root = ROOT) {
  const buildId = path.join(root, ".next", "BUILD_ID");
  if (!existsSync(buildId)) return "no build yet";
  const builtMs = statSync(buildId).mtimeMs;
  let newest = 0;
  for (const source of [...SOURCE_DIRS, ...SOURCE_FILES]) newest = Math.max(newest, newestMtimeMs(path.join(root, source)));
  return newest > builtMs ? "sources changed since the last build" : null;
}

/**
 * Runs a command with inherited stdio, forwarding SIGINT/SIGTERM (or `options.signals`) to it, and resolves with the exit
 * code (128 + signal number when it was killed by a signal, as a shell reports it).
 */
export function run(command, args, options = {}) {
  const { signals = ["SIGINT", "SIGTERM"], ...spawnOptions } = options;
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, stdio: "inherit", ...spawnOptions });
    const forward = (signal) => child.kill(signal);
    for (const signal of signals) process.on(signal, forward);
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      for (const s of signals) process.off(s, forward);
      resolve(code ?? 128 + (constants.signals[signal] ?? 0));
    });
  });
}

/** Runs `next build` when needed; exits the process with the build's code if it fails. */
export async function buildIfStale(env = process.env) {
  const reason = staleReason();
  if (!reason) return;
  console.log(`idemgate: building (${reason}) …`);
  const code = await run(process.execPath, [NEXT_BIN, "build"], { env });
  if (code !== 0) {
    console.error(`idemgate: next build failed (exit ${code})`);
    process.exit(code);
  }
}

// `node scripts/build-if-stale.mjs`: the build stage of `npm test` (scripts/test.mjs)
if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const reason = staleReason();
  if (reason) await buildIfStale({ ...process.env, NEXT_TELEMETRY_DISABLED: "1" });
  else console.log("idemgate: the build is newer than every source file; not rebuilt");
}
