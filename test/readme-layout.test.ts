import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "..");

/** The README's "Layout" block: top-level folders, and the folders of lib/ indented under `lib/`. */
function readmeLayout(): { top: string[]; lib: string[] } {
  const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
  const section = readme.split(/^## Layout$/m)[1];
  if (!section) throw new Error("README.md has no ## Layout section");
  const block = section.split("```")[1];
  const top: string[] = [];
  const lib: string[] = [];
  for (const line of block.split("\n")) {
    const folder = /^( *)([\w.-]+)\/(\s|$)/.exec(line);
    if (!folder) continue;
    (folder[1].length === 0 ? top : lib).push(folder[2]);
  }
  return { top, lib };
}

/** Folders the checkout does not track: installed, generated, built, or written by test runs. */
const UNTRACKED = new Set(
  readFileSync(path.join(ROOT, ".gitignore"), "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => /^[\w.-]+\/$/.test(l))
    .map((l) => l.slice(0, -1)),
);

const folders = (dir: string) =>
  readdirSync(path.join(ROOT, dir), { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith(".") && !UNTRACKED.has(e.name))
    .map((e) => e.name)
    .sort();

describe("the README's Layout section", () => {
  const layout = readmeLayout();

  it("lists exactly the folders of lib/, each once", () => {
    expect([...layout.lib].sort()).toEqual(folders("lib"));
    expect(new Set(layout.lib).size).toBe(layout.lib.length);
  });

  it("leaves nothing loose at lib/: every file belongs to a folder", () => {
    const loose = readdirSync(path.join(ROOT, "lib"), { withFileTypes: true }).filter((e) => e.isFile());
    expect(loose.map((e) => e.name)).toEqual([]);
  });

  it("lists exactly the top-level folders", () => {
    expect([...layout.top].sort()).toEqual(folders("."));
  });
});
