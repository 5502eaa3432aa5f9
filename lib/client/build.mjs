// Builds the package (npm pack runs it as prepack): TypeScript to ESM JavaScript and .d.ts in dist/,
// with the relative imports given the ".js" extension Node's ESM loader needs. No dependencies: the
// compiler is the one of the project this folder lives in.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

const here = path.dirname(new URL(import.meta.url).pathname);
const dist = path.join(here, "dist");
rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(path.join(here, "../../package.json")).resolve("typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", path.join(here, "tsconfig.json")], { stdio: "inherit" });
for (const file of readdirSync(dist)) {
  if (!file.endsWith(".js") && !file.endsWith(".d.ts")) continue;
  const full = path.join(dist, file);
  const text = readFileSync(full, "utf8").replace(/(from\s+|import\()(["'])(\.\/[\w-]+)\2/g, "$1$2$3.js$2");
  writeFileSync(full, text);
}
