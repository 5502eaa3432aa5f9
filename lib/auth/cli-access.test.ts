import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { cliActorFrom, localUrl, publishServerAccess, readServerAccess, serverFileOf, verifyCliToken } from "./cli-access";

let dir = "";
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "idemgate-cli-access-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("the server's address and credential for the command line", () => {
  it("are published readable by the owner only, verify only this credential, and go at shutdown", async () => {
    const unpublish = await publishServerAccess(dir, "http://127.0.0.1:3000");
    expect((await stat(serverFileOf(dir))).mode & 0o777).toBe(0o600);
    const access = await readServerAccess(dir);
    expect(access).toMatchObject({ pid: process.pid, url: "http://127.0.0.1:3000" });
    expect(access!.token).toMatch(/^idgl_[A-Za-z0-9_-]{43}$/);
    expect(verifyCliToken(access!.token)).toBe(true);
    expect(verifyCliToken(access!.token.slice(0, -1) + (access!.token.endsWith("A") ? "B" : "A"))).toBe(false);
    expect(verifyCliToken("idg_" + access!.token.slice(5))).toBe(false);

    // a new start publishes a new credential: the old one is worthless
    const again = await publishServerAccess(dir, "http://127.0.0.1:3000");
    const second = await readServerAccess(dir);
    expect(second!.token).not.toBe(access!.token);
    expect(verifyCliToken(access!.token)).toBe(false);
    expect(verifyCliToken(second!.token)).toBe(true);

    await again();
    await unpublish();
    expect(await readServerAccess(dir)).toBeNull();
    expect(verifyCliToken(second!.token)).toBe(false);
  });

  it("a file another process wrote is not removed at this one's shutdown", async () => {
    const unpublish = await publishServerAccess(dir, "http://127.0.0.1:3000");
    await writeFile(serverFileOf(dir), JSON.stringify({ pid: process.pid + 1, url: "http://127.0.0.1:3001", token: "idgl_other" }));
    await unpublish();
    expect(JSON.parse(await readFile(serverFileOf(dir), "utf8")).pid).toBe(process.pid + 1);
  });

  it("a damaged or foreign file reads as none", async () => {
    await writeFile(serverFileOf(dir), "{not json");
    expect(await readServerAccess(dir)).toBeNull();
    await writeFile(serverFileOf(dir), JSON.stringify({ pid: 1, url: "http://x", token: "idg_an-api-token" }));
    expect(await readServerAccess(dir)).toBeNull();
  });

  it("the URL to reach a server is a loopback address when it listens on every interface", () => {
    expect(localUrl({ address: "0.0.0.0", family: "IPv4", port: 3000 })).toBe("http://127.0.0.1:3000");
    expect(localUrl({ address: "::", family: "IPv6", port: 3000 })).toBe("http://[::1]:3000");
    expect(localUrl({ address: "127.0.0.1", family: "IPv4", port: 4123 })).toBe("http://127.0.0.1:4123");
    expect(localUrl({ address: "::1", family: "IPv6", port: 80 })).toBe("http://[::1]:80");
  });

  it("the CLI's actor is a cli: name, nothing else", () => {
    expect(cliActorFrom(encodeURIComponent("cli:ana@build-01"))).toBe("cli:ana@build-01");
    expect(cliActorFrom(encodeURIComponent("cli:jörg@host"))).toBe("cli:jörg@host");
    expect(cliActorFrom(null)).toBeNull();
    expect(cliActorFrom("admin@idemgate.local")).toBeNull();
    expect(cliActorFrom(encodeURIComponent("cli:two words"))).toBeNull();
    expect(cliActorFrom("cli:%E0%A4%A")).toBeNull();
    expect(cliActorFrom(encodeURIComponent("cli:" + "x".repeat(201)))).toBeNull();
  });
});
