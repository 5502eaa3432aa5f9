import { readFileSync } from "node:fs";
import path from "node:path";
import semver from "semver";
import { describe, expect, it } from "vitest";

// `npm ci` warns EBADENGINE for every installed package whose `engines.node` rejects the running
// Node. The project declares the Node versions it runs on (package.json `engines.node`): every
// package the lockfile installs must accept the oldest of them, and the Node running this test when
// the project declares it.
const root = path.resolve(import.meta.dirname, "..");
const pkg = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(path.join(root, "package-lock.json"), "utf8")) as {
  packages: Record<string, { version?: string; engines?: { node?: string } | string[]; os?: string[]; cpu?: string[] }>;
};

function installsHere(entry: { os?: string[]; cpu?: string[] }): boolean {
  const allows = (list: string[] | undefined, value: string) =>
    !list || (list.includes(value) || (list.some((item) => item.startsWith("!")) && !list.includes(`!${value}`)));
  return allows(entry.os, process.platform) && allows(entry.cpu, process.arch);
}

function rejecting(nodeVersion: string, onlyInstalledHere: boolean): string[] {
  const found: string[] = [];
  for (const [where, entry] of Object.entries(lock.packages)) {
    if (where === "" || Array.isArray(entry.engines)) continue;
    const range = entry.engines?.node;
    if (!range || (onlyInstalledHere && !installsHere(entry))) continue;
    if (!semver.satisfies(nodeVersion, range)) found.push(`${where}@${entry.version}: node ${range}`);
  }
  return found;
}

describe("the lockfile's engines", () => {
  it("accept the oldest Node the project declares", () => {
    const oldest = semver.minVersion(pkg.engines.node);
    expect(oldest).not.toBeNull();
    expect(rejecting(oldest!.version, false)).toEqual([]);
  });

  it("accept the Node running the tests, when the project declares it", () => {
    expect(semver.satisfies(process.version, pkg.engines.node)).toBe(true);
    expect(rejecting(process.version, true)).toEqual([]);
  });
});
