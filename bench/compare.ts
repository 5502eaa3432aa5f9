import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile, rm, symlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
/** The middle value, or the mean of the two middle ones. */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/*
 * npm run bench -- --compare <ref> [--only engine,peers] [--rounds 2] [--full] [--no-build]
 *
 * A quick bench of a base commit and of the work tree in one run, so a change that slows a first
 * execution says so before it lands. The base is checked out into a temporary git worktree (its
 * node_modules hard links to this tree's, its Prisma client generated there), both trees run
 * `bench/run.ts --quick --only <sections>` in turn (base, tree, tree, base, …: the rounds alternate
 * so a change in the machine's load falls on both alike), and the median of each row's figure over
 * the rounds is printed side by side with the ratio tree / base. The temporary worktree is removed at
 * the end. Sections default to engine and peers (no server build); client and gateway serve each
 * tree's own `.next` (built first in the base's worktree, and in this tree unless --no-build).
 */

export interface ParsedRow {
  key: string;
  value: number;
  unit: string;
  /** the row's own ratio against its baseline in the same run (NaN when it has none) */
  ratio: number;
  baseline: string;
}

/** The rows of bench/run.ts's Markdown table: `| section | measurement | median | …`. */
export function parseBenchTable(stdout: string): ParsedRow[] {
  const rows: ParsedRow[] = [];
  for (const line of stdout.split("\n")) {
    if (!line.startsWith("| ") || line.startsWith("| section ") || line.startsWith("|---")) continue;
    const cells = line
      .slice(2, -2)
      .split(/(?<!\\) \| /)
      .map((c) => c.replace(/\\\|/g, "|").trim());
    if (cells.length < 3) continue;
    const [section, name, figure, , , baseline = "", ratio = ""] = cells;
    const m = /^(-?[\d,]+(?:\.\d+)?)\s*(.*)$/.exec(figure);
    const r = /^(-?[\d.]+)×$/.exec(ratio);
    rows.push({ key: `${section} | ${name}`, value: m ? Number(m[1].replace(/,/g, "")) : NaN, unit: m ? m[2] : figure, ratio: r ? Number(r[1]) : NaN, baseline });
  }
  return rows;
}

/** Throughputs are better higher; times and sizes lower. */
const higherIsBetter = (unit: string) => /\/s$/.test(unit);

function load(): string {
  return os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(" ");
}

function run(cmd: string, args: string[], cwd: string, echo: boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: process.env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => {
      if (echo) process.stderr.write(d);
    });
    child.on("error", reject);
    child.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(" ")} in ${cwd} exited with ${code}`))));
  });
}

export async function compare(argv: string[]): Promise<void> {
  const option = (name: string) => {
    const at = argv.indexOf(`--${name}`);
    return at === -1 ? undefined : argv[at + 1];
  };
  const ref = option("compare");
  if (!ref || ref.startsWith("--")) throw new Error("--compare needs a git ref (a commit, branch or tag)");
  const only = option("only") ?? "engine,peers";
  const rounds = Math.max(1, Number(option("rounds") ?? 2));
  const quick = !argv.includes("--full");
  const tree = process.cwd();
  const git = (...args: string[]) => execFileSync("git", args, { cwd: tree, encoding: "utf8" }).trim();
  const sha = git("rev-parse", "--verify", `${ref}^{commit}`);
  const head = git("rev-parse", "HEAD");
  const dirty = git("status", "--porcelain", "--untracked-files=no") !== "";
  const baseDir = path.join(os.tmpdir(), `idemgate-bench-base-${sha.slice(0, 8)}-${randomUUID().slice(0, 6)}`);
  const needsServer = only.split(",").some((s) => s === "client" || s === "gateway");

  console.log(`# Idemgate benchmark comparison — ${new Date().toISOString()}`);
  console.log(`base ${ref} (${sha.slice(0, 10)}) against the work tree (${head.slice(0, 10)}${dirty ? " with uncommitted changes" : ""})`);
  console.log(`sections ${only}, ${quick ? "quick" : "full"} runs, ${rounds} round${rounds === 1 ? "" : "s"} per tree, alternating; load ${load()} at the start`);

  git("worktree", "add", "--detach", baseDir, sha);
  try {
    // The base runs on this tree's packages; a different lockfile is said, not installed. A copy of
    // hard links (cp -al: seconds, no space), not a symlink: Next.js's Turbopack refuses to build an
    // app whose packages resolve outside its own directory. Across filesystems, where hard links
    // cannot go, a symlink, with which the base's server cannot be built (said when a section needs it).
    const modules = path.join(baseDir, "node_modules");
    try {
      execFileSync("cp", ["-al", path.join(tree, "node_modules"), modules], { stdio: "ignore" });
    } catch {
      await rm(modules, { recursive: true, force: true });
      await symlink(path.join(tree, "node_modules"), modules, "dir");
      if (needsServer) console.log("note: the base's node_modules is a symlink (another filesystem): its server cannot be built there");
    }
    const lockOf = (dir: string) => readFile(path.join(dir, "package-lock.json"), "utf8").catch(() => "");
    if ((await lockOf(tree)) !== (await lockOf(baseDir))) {
      console.log("note: the base's package-lock.json differs from the work tree's; both run on the work tree's node_modules");
    }
    const node = process.execPath;
    const tsx = path.join(tree, "node_modules", "tsx", "dist", "cli.mjs");
    // a generator without an output of its own writes into node_modules: this tree's, through the links
    const schema = await readFile(path.join(baseDir, "prisma", "schema.prisma"), "utf8");
    if (!/^\s*output\s*=/m.test(schema)) throw new Error(`the base's Prisma schema has no generator output: its client would overwrite this tree's node_modules`);
    console.error(`bench compare: generating the base's Prisma client in ${baseDir}`);
    await run(node, [path.join(tree, "node_modules", "prisma", "build", "index.js"), "generate"], baseDir, false);

    const benchArgs = (dir: string) => {
      const args = [tsx, "bench/run.ts", ...(quick ? ["--quick"] : []), "--only", only];
      // the base's worktree has no build of its own: build it once, in its first round
      const built = existsSync(path.join(dir, ".next", "BUILD_ID"));
      if (!needsServer || (dir === tree ? argv.includes("--no-build") : built)) args.push("--no-build");
      return args;
    };
    const results: Record<"base" | "tree", ParsedRow[][]> = { base: [], tree: [] };
    const loads: string[] = [];
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? (["base", "tree"] as const) : (["tree", "base"] as const);
      for (const which of order) {
        const dir = which === "base" ? baseDir : tree;
        const before = load();
        console.error(`bench compare: round ${round + 1}/${rounds}, ${which} (load ${before})`);
        const out = await run(node, benchArgs(dir), dir, true);
        results[which].push(parseBenchTable(out));
        loads.push(`${which} ${before}`);
      }
    }

    const keys: string[] = [];
    for (const rows of [...results.tree, ...results.base]) for (const r of rows) if (!keys.includes(r.key)) keys.push(r.key);
    const figure = (which: "base" | "tree", key: string) => {
      const found = results[which].map((rows) => rows.find((r) => r.key === key)).filter((r): r is ParsedRow => r !== undefined);
      const values = found.map((r) => r.value).filter((v) => Number.isFinite(v));
      const ratios = found.map((r) => r.ratio).filter((v) => Number.isFinite(v));
      return { value: median(values), unit: found[0]?.unit ?? "", spread: values, ratio: median(ratios), baseline: found[0]?.baseline ?? "" };
    };
    const fmt = (v: number, unit: string) =>
      Number.isFinite(v) ? `${v < 10 ? v.toFixed(2) : Math.round(v).toLocaleString("en-US")} ${unit}`.trim() : "n/a";
    console.log(`\nload (1, 5, 15 min) at the start of each run: ${loads.join("; ")}; at the end ${load()}\n`);
    console.log("| section | measurement | base | work tree | tree / base | reading | against its baseline in the same run: base → tree |");
    console.log("|---|---|---:|---:|---:|---|---|");
    for (const key of keys) {
      const [section, ...rest] = key.split(" | ");
      const b = figure("base", key);
      const t = figure("tree", key);
      const unit = t.unit || b.unit;
      const ratio = t.value / b.value;
      let reading = "";
      if (Number.isFinite(ratio) && /µs|ms|B|\/s/.test(unit)) {
        const better = higherIsBetter(unit) ? ratio > 1 : ratio < 1;
        const change = Math.abs(ratio - 1);
        reading = change < 0.1 ? "same (within 10 %)" : better ? "faster" : unit === "B" ? "larger" : "**slower**";
        if (unit === "B" && change >= 0.1 && better) reading = "smaller";
      } else if (!Number.isFinite(b.value) && Number.isFinite(t.value)) reading = "new in the work tree";
      else if (Number.isFinite(b.value) && !Number.isFinite(t.value)) reading = "not measured in the work tree";
      // a row's own ratio (against a baseline measured beside it) moves less with the load than its figure
      const inRun = (bf: { ratio: number; baseline: string }, tf: { ratio: number; baseline: string }) =>
        Number.isFinite(bf.ratio) || Number.isFinite(tf.ratio)
          ? `${Number.isFinite(bf.ratio) ? bf.ratio.toFixed(2) : "–"}× → ${Number.isFinite(tf.ratio) ? tf.ratio.toFixed(2) : "–"}× ${tf.baseline || bf.baseline}`
          : "";
      const spread = (f: { spread: number[] }) => (f.spread.length > 1 ? ` (${f.spread.map((v) => fmt(v, "")).join(", ")})` : "");
      const cells = [section, rest.join(" | "), fmt(b.value, b.unit) + spread(b), fmt(t.value, t.unit) + spread(t), Number.isFinite(ratio) ? `${ratio.toFixed(2)}×` : "", reading, inRun(b, t)];
      console.log(`| ${cells.map((c) => c.replace(/\|/g, "\\|")).join(" | ")} |`);
    }
    console.log(
      "\nEach figure is the median over the rounds (each round's figures in parentheses). On a shared machine the figures move with the load between runs; " +
        "the last column (each row's ratio to the baseline measured beside it in the same run, median over the rounds) moves less. Read a **slower** twice before believing it.",
    );
  } finally {
    // a link or a copy of links: removing it leaves this tree's packages as they are
    await rm(path.join(baseDir, "node_modules"), { recursive: true, force: true }).catch(() => {});
    try {
      git("worktree", "remove", "--force", baseDir);
    } catch {
      await rm(baseDir, { recursive: true, force: true });
      git("worktree", "prune");
    }
  }
}
