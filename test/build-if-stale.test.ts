import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { staleReason } from "../scripts/build-if-stale.mjs";

const execFileAsync = promisify(execFile);

// A project root with a build and a client package laid out as lib/client is: the build is stamped
// in the past, so anything written after it is newer.
function builtProject(): string {
  const root = mkdtempSync(path.join(tmpdir(), "idemgate-stale-"));
  mkdirSync(path.join(root, ".next"));
  mkdirSync(path.join(root, "lib", "client"), { recursive: true });
  writeFileSync(path.join(root, "lib", "client", "index.js"), "export const x = 1;\n");
  writeFileSync(
    path.join(root, "lib", "client", "package.json"),
    JSON.stringify({ name: "@idemgate/client", version: "0.1.0", type: "module", files: ["index.js"] }),
  );
  const past = new Date(Date.now() - 60_000);
  for (const file of ["lib/client/index.js", "lib/client/package.json"]) utimesSync(path.join(root, file), past, past);
  writeFileSync(path.join(root, ".next", "BUILD_ID"), "test");
  const built = new Date(Date.now() - 30_000);
  utimesSync(path.join(root, ".next", "BUILD_ID"), built, built);
  return root;
}

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

describe("staleReason", () => {
  it("does not rebuild for the tarball `npm pack` leaves in lib/client", async () => {
    const root = builtProject();
    roots.push(root);
    expect(staleReason(root)).toBeNull();
    await execFileAsync("npm", ["pack", "--silent"], { cwd: path.join(root, "lib", "client") });
    expect(readdirSync(path.join(root, "lib", "client"))).toContain("idemgate-client-0.1.0.tgz");
    expect(staleReason(root)).toBeNull();
  });

  it("still rebuilds when a source file changes", () => {
    const root = builtProject();
    roots.push(root);
    writeFileSync(path.join(root, "lib", "client", "index.js"), "export const x = 2;\n");
    expect(staleReason(root)).toBe("sources changed since the last build");
  });
});
