// Layout rules the README's "Layout" section states, checked on every `npm test`:
//  1. no import cycle between files (madge, type-only imports included);
//  2. no import cycle between the folders of lib/ (a file in lib/a importing lib/b is an edge a -> b;
//     tests are left out: they sit at the top of the graph, nothing imports them);
//  3. no component imports from app/ (server actions and helpers live in lib/);
//  4. every Playwright spec takes `test` from e2e/fixtures.ts, whose check fails a test on any error
//     in the browser's console;
//  5. the console's data goes through lib/console/queries/: no other file imports @tanstack/react-query
//     (but components/providers.tsx, which holds the query client) or calls apiFetch, and a query key
//     is built only by its factory (lib/console/queries/query-keys.ts).
// Exits non-zero and names each offence.
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import madge from "madge";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const DIRS = ["lib", "app", "components", "cli", "test", "bench", "instrumentation.ts", "proxy.ts"];

const result = await madge(DIRS, {
  baseDir: ROOT,
  fileExtensions: ["ts", "tsx"],
  tsConfig: path.join(ROOT, "tsconfig.json"),
  excludeRegExp: [/^generated\//, /^node_modules\//, /\.d\.ts$/],
});
const graph = result.obj();
const problems = [];

for (const cycle of result.circular()) problems.push(`file cycle: ${[...cycle, cycle[0]].join(" -> ")}`);

const isTest = (f) => /\.test\.tsx?$/.test(f);
const libFolder = (f) => (f.startsWith("lib/") && f.split("/").length > 2 ? f.split("/")[1] : null);
/** folder -> folder -> one file edge that makes it, for the message */
const edges = new Map();
for (const [from, deps] of Object.entries(graph)) {
  const a = libFolder(from);
  if (!a || isTest(from)) continue;
  for (const to of deps) {
    const b = libFolder(to);
    if (!b || b === a) continue;
    if (!edges.has(a)) edges.set(a, new Map());
    if (!edges.get(a).has(b)) edges.get(a).set(b, `${from} -> ${to}`);
  }
}
// a folder cycle shows as a pair a -> ... -> b -> ... -> a: find strongly connected folders
const folders = [...new Set([...edges.keys(), ...[...edges.values()].flatMap((m) => [...m.keys()])])].sort();
const reach = (start) => {
  const seen = new Set();
  const stack = [start];
  while (stack.length) for (const n of edges.get(stack.pop())?.keys() ?? []) if (!seen.has(n)) (seen.add(n), stack.push(n));
  return seen;
};
const reachable = new Map(folders.map((f) => [f, reach(f)]));
for (const a of folders) {
  for (const [b, example] of edges.get(a) ?? []) {
    if (reachable.get(b).has(a)) problems.push(`folder cycle: lib/${a} -> lib/${b} (${example}) and lib/${b} leads back to lib/${a}`);
  }
}

for (const [from, deps] of Object.entries(graph)) {
  if (!from.startsWith("components/")) continue;
  for (const to of deps) if (to.startsWith("app/")) problems.push(`component imports from app/: ${from} -> ${to}`);
}

const QUERIES = "lib/console/queries/";
const REACT_QUERY_HOLDERS = new Set(["components/providers.tsx"]);
for (const file of Object.keys(graph)) {
  if (isTest(file)) continue;
  const text = readFileSync(path.join(ROOT, file), "utf8");
  const inQueries = file.startsWith(QUERIES);
  if (!inQueries && !REACT_QUERY_HOLDERS.has(file) && /from\s+["']@tanstack\/react-query["']/.test(text)) {
    problems.push(`${file} imports @tanstack/react-query: console data goes through a hook of ${QUERIES}`);
  }
  if (!inQueries && file !== "lib/console/api.ts" && /\bapiFetch\b/.test(text)) problems.push(`${file} calls apiFetch: console data goes through a hook of ${QUERIES}`);
  if (file !== `${QUERIES}query-keys.ts` && /queryKey:\s*\[/.test(text)) problems.push(`${file} writes a query key by hand: build it with consoleKeys (${QUERIES}query-keys.ts)`);
}

for (const file of readdirSync(path.join(ROOT, "e2e"))) {
  if (!/\.(spec|setup)\.ts$/.test(file)) continue;
  const text = readFileSync(path.join(ROOT, "e2e", file), "utf8");
  if (/from\s+["']@playwright\/test["']/.test(text) || !/from\s+["']\.\/fixtures["']/.test(text)) {
    problems.push(`e2e/${file} must take test and expect from ./fixtures (not @playwright/test): its check fails a test on any browser console error`);
  }
}

if (problems.length) {
  console.error(`Layout check failed (${problems.length}):\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`Layout check: ${Object.keys(graph).length} files, no file or lib/ folder cycle, no component importing app/, every e2e spec on e2e/fixtures.ts, console data only through ${QUERIES}`);
