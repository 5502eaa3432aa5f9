#!/usr/bin/env node
// `npx idemgate …`: runs the TypeScript CLI from the project root, so `.data/`, prisma/migrations and
// the tsconfig path aliases resolve wherever the command was typed.
//
// The CLI's own sources are bundled once into node_modules/.cache/idemgate-cli/ (esbuild, packages
// left external) and that bundle is run while it is newer than every source file: a command starts
// in well under a second instead of loading a few hundred TypeScript modules one by one. When the
// bundle cannot be made or loaded, the sources run through tsx as before.
import { existsSync, mkdirSync, renameSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { newestMtimeMs } from "../scripts/build-if-stale.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
// A data directory given relative to where the command was typed keeps meaning that place.
const dataDir = process.env.IDEMGATE_DATA_DIR?.trim();
if (dataDir && !isAbsolute(dataDir)) process.env.IDEMGATE_DATA_DIR = resolve(process.cwd(), dataDir);
// So does the configuration file (its webhooks: are where `idemgate reconcile` queues events); unset,
// idemgate.config.yaml there when it exists, as `npm start` reads it.
const configFile = process.env.IDEMGATE_CONFIG?.trim() || (existsSync("idemgate.config.yaml") ? "idemgate.config.yaml" : "");
if (configFile) process.env.IDEMGATE_CONFIG = resolve(process.cwd(), configFile);
process.chdir(root);

const entry = join(root, "cli", "idemgate.ts");
const bundle = join(root, "node_modules", ".cache", "idemgate-cli", "idemgate.mjs");
// what the bundle is made of: the CLI, the library and the generated Prisma client it imports
const SOURCES = ["cli", "lib", "generated", "tsconfig.json", "package-lock.json"];

async function freshBundle() {
  if (process.env.IDEMGATE_CLI_BUNDLE === "0") return null;
  const newest = Math.max(...SOURCES.map((s) => newestMtimeMs(join(root, s))));
  if (existsSync(bundle) && statSync(bundle).mtimeMs > newest) return bundle;
  try {
    const { build } = await import("esbuild");
    mkdirSync(dirname(bundle), { recursive: true });
    // written beside and renamed, so a command started meanwhile never reads half a bundle
    const partial = `${bundle}.${process.pid}.tmp`;
    await build({
      entryPoints: [entry],
      outfile: partial,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      packages: "external",
      tsconfig: join(root, "tsconfig.json"),
      logLevel: "silent",
    });
    renameSync(partial, bundle);
    return bundle;
  } catch {
    return null;
  }
}

// IDEMGATE_CLI_BUNDLE: "0" runs the sources through tsx; "1" (the CLI's tests) requires the bundle,
// so that a bundle that cannot load fails loudly instead of falling back
async function load() {
  const built = await freshBundle();
  if (built) {
    try {
      return await import(pathToFileURL(built).href);
    } catch (err) {
      if (process.env.IDEMGATE_CLI_BUNDLE === "1" || err?.code !== "ERR_MODULE_NOT_FOUND") throw err;
    }
  } else if (process.env.IDEMGATE_CLI_BUNDLE === "1") {
    throw new Error("the CLI's bundle could not be built (IDEMGATE_CLI_BUNDLE=1)");
  }
  const { register } = await import("tsx/esm/api");
  register({ tsconfig: join(root, "tsconfig.json") });
  return import(pathToFileURL(entry).href);
}

const cli = await load();
cli.exitWhenDone(await cli.main(process.argv));
