import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { expect, it } from "vitest";

// The "parallel" unit files share their worker's modules (vitest.config.ts). A file that replaces one
// of the project's modules with vi.mock would see another file's real module, or leave its mock to
// the next: each such file must be named in the config's ISOLATED list.
it("every unit test file that mocks a project module runs isolated", () => {
  const config = readFileSync("vitest.config.ts", "utf8");
  const isolated = config.slice(config.indexOf("const ISOLATED"), config.indexOf("];", config.indexOf("const ISOLATED")));
  const mocking = execFileSync("git", ["grep", "-lE", String.raw`vi\.mock\(["']@/`, "--", "*.test.ts", ":!test/faults/**"], { encoding: "utf8" })
    .split("\n")
    .filter(Boolean);
  expect(mocking.length).toBeGreaterThan(0);
  expect(mocking.filter((file) => !isolated.includes(`"${file}"`))).toEqual([]);
});
