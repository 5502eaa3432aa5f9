// Summarizes a V8 CPU profile (.cpuprofile, as written by `node --cpu-prof`): the functions with the
// most self time, and optionally the inclusive time of functions whose "name file" matches a pattern.
//   node bench/cpuprofile-summary.mjs <file.cpuprofile> [pattern] [--top N]
// The same file opens as a flame graph in Chrome DevTools (Performance) or speedscope.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({ options: { top: { type: "string", default: "30" } }, allowPositionals: true });
const [file, pattern] = positionals;
if (!file) {
  console.error("usage: node bench/cpuprofile-summary.mjs <file.cpuprofile> [pattern] [--top N]");
  process.exit(1);
}
const top = Number(values.top);
const profile = JSON.parse(readFileSync(file, "utf8"));

const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);

// time (µs) spent with each node on top of the stack
const selfTime = new Map();
profile.samples.forEach((id, i) => selfTime.set(id, (selfTime.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...selfTime.values()].reduce((a, b) => a + b, 0);

const label = (node) => {
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*?\/(lib|app|scripts|bench|\.next)\//, "$1/");
  return `${functionName || "(anonymous)"} ${where}${lineNumber >= 0 && where ? `:${lineNumber + 1}` : ""}`;
};
const pct = (us) => `${((100 * us) / total).toFixed(1).padStart(5)} %`;
const print = (title, entries) => {
  console.log(`\n${title}`);
  for (const [name, us] of [...entries].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(us)}  ${name}`);
};

const bySelf = new Map();
for (const [id, us] of selfTime) {
  const name = label(nodes.get(id));
  bySelf.set(name, (bySelf.get(name) ?? 0) + us);
}
console.log(`${file}: ${(total / 1e6).toFixed(2)} s sampled`);
print("self time", bySelf);

if (pattern) {
  const re = new RegExp(pattern);
  // each sample counts once for every distinct function on its stack
  const inclusive = new Map();
  for (const [id, us] of selfTime) {
    const seen = new Set();
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const name = label(nodes.get(cur)).replace(/:\d+$/, "");
      if (seen.has(name) || !re.test(name)) continue;
      seen.add(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + us);
    }
  }
  print(`inclusive time, functions matching /${pattern}/`, inclusive);
}
