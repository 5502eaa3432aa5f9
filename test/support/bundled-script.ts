import { randomUUID } from "node:crypto";
import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { build } from "esbuild";
import { ROOT } from "./server";

// Helper processes the tests spawn many times (guard workers, lock holders, MCP test servers) run
// as one esbuild bundle of their sources, built once per test process: `node --import tsx` compiles
// the whole import graph again in every child (about 0.9 CPU-s each against 0.1 s), which on a
// busy machine is what made the many-process tests slow and late. Packages stay imports, resolved
// from the project's node_modules (the bundle is written under it); `@/…` paths are bundled.

const OUT_DIR = path.join(ROOT, "node_modules", ".cache", "idemgate-test-scripts");
const built = new Map<string, Promise<string>>();
const written: string[] = [];

process.once("exit", () => {
  for (const file of written) rmSync(file, { force: true });
});

/** The path of a runnable ESM bundle of `entry` (relative to the project root): `node <path> …`. */
export function bundledScript(entry: string): Promise<string> {
  let out = built.get(entry);
  if (!out) {
    out = bundle(entry);
    built.set(entry, out);
  }
  return out;
}

async function bundle(entry: string): Promise<string> {
  mkdirSync(OUT_DIR, { recursive: true });
  const outfile = path.join(OUT_DIR, `${path.basename(entry).replace(/\.[cm]?ts$/, "")}-${process.pid}-${randomUUID().slice(0, 8)}.mjs`);
  written.push(outfile);
  await build({
    entryPoints: [path.join(ROOT, entry)],
    absWorkingDir: ROOT,
    bundle: true,
    packages: "external",
    platform: "node",
    format: "esm",
    target: "node20",
    outfile,
    logLevel: "warning",
  });
  return outfile;
}
