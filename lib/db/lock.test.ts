import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { bundledScript } from "@/test/support/bundled-script";
import { openDatabase } from "./database";
import { acquireDataDirLock, DataDirLockedError, lockFileOf } from "./lock";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
/** test/support/lock-holder.ts bundled once: each holder then loads in a tenth of tsx's time, so racing holders start together */
let HOLDER: string;
beforeAll(async () => {
  HOLDER = await bundledScript("test/support/lock-holder.ts");
});

type Answer = { won: true; pid: number } | { won: false; error: string; message: string };

interface Holder {
  child: ChildProcess;
  /** when it had loaded and started waiting for its moment */
  readyAtMs: Promise<number>;
  answer: Promise<Answer>;
  exited: Promise<unknown>;
}

/** Another process that takes the lock (or opens the database) at `startAtMs`; see test/support/lock-holder.ts. */
function holder(mode: "lock" | "database", dataDir: string, startAtMs = 0): Holder {
  const child = spawn(process.execPath, [HOLDER, mode, dataDir, String(startAtMs)], {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const exited = once(child, "close");
  const lines = createInterface({ input: child.stdout! });
  const received: string[] = [];
  const waiters: (() => void)[] = [];
  lines.on("line", (line) => {
    received.push(line);
    waiters.splice(0).forEach((wake) => wake());
  });
  const line = (n: number) =>
    new Promise<string>((resolve, reject) => {
      const check = () => (received.length > n ? resolve(received[n]) : waiters.push(check));
      check();
      void exited.then(() => setImmediate(() => reject(new Error(`the holder exited without answering: ${stderr}`))));
    });
  const readyAtMs = line(0).then((l) => (JSON.parse(l) as { readyAtMs: number }).readyAtMs);
  const answer = line(1).then((l) => JSON.parse(l) as Answer);
  return { child, readyAtMs, answer, exited };
}

async function stop(h: Holder): Promise<void> {
  if (h.child.exitCode !== null || h.child.signalCode !== null) return;
  h.child.kill("SIGKILL");
  await h.exited;
}

const REFUSAL_TAIL = "Stop that process, or run this command through the running server, or set DATABASE_URL to use a PostgreSQL server.";

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

let dir = "";
let dataDir = "";
const holders: Holder[] = [];

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "idemgate-lock-"));
  dataDir = path.join(dir, "pglite");
});

afterEach(async () => {
  await Promise.all(holders.splice(0).map(stop));
  await rm(dir, { recursive: true, force: true });
});

describe("the embedded database's lock", () => {
  it("processes racing for one data directory: exactly one takes it, the others are told who holds it", async () => {
    for (let round = 0; round < 2; round++) {
      const roundDir = path.join(dir, `round-${round}`);
      // all try at the same wall-clock moment, after their start-up
      const startAt = Date.now() + 10_000;
      const racers = [holder("lock", roundDir, startAt), holder("lock", roundDir, startAt), holder("lock", roundDir, startAt)];
      holders.push(...racers);
      // a racer still loading at the moment would not be racing
      for (const readyAtMs of await Promise.all(racers.map((r) => r.readyAtMs))) expect(readyAtMs).toBeLessThan(startAt);
      const answers = await Promise.all(racers.map((r) => r.answer));
      const winners = answers.filter((a) => a.won);
      expect(winners, JSON.stringify(answers)).toHaveLength(1);
      const winner = winners[0] as { pid: number };
      for (const loser of answers.filter((a) => !a.won) as { error: string; message: string }[]) {
        expect(loser.error).toBe("DataDirLockedError");
        // the holder's pid is in the message unless the refused one read the file before it was written
        expect(loser.message).toMatch(
          new RegExp(`^${escape(`the embedded database in ${roundDir} is open in another process`)}( \\(pid ${winner.pid}\\))?\\. ${escape(REFUSAL_TAIL)}$`),
        );
      }
      await Promise.all(racers.map(stop));
    }
  }, 120_000);

  it("a refused opener names the holder's pid once the holder is up", async () => {
    const first = holder("lock", dataDir);
    holders.push(first);
    const won = await first.answer;
    expect(won).toEqual({ won: true, pid: first.child.pid });
    const second = holder("lock", dataDir);
    holders.push(second);
    expect(await second.answer).toEqual({
      won: false,
      error: "DataDirLockedError",
      message: `the embedded database in ${dataDir} is open in another process (pid ${first.child.pid}). ${REFUSAL_TAIL}`,
    });
    await expect(acquireDataDirLock(dataDir)).rejects.toThrow(DataDirLockedError);
  });

  it("a holder killed with SIGKILL leaves no lock behind: the next opener takes it", async () => {
    const first = holder("lock", dataDir);
    holders.push(first);
    expect((await first.answer).won).toBe(true);
    first.child.kill("SIGKILL");
    await first.exited;
    // the dead holder's pid is still in the file; it decides nothing
    expect((await readFile(lockFileOf(dataDir), "utf8")).trim()).toBe(String(first.child.pid));
    const lock = await acquireDataDirLock(dataDir);
    expect((await readFile(lockFileOf(dataDir), "utf8")).trim()).toBe(String(process.pid));
    await lock.release();
  });

  it("a lock file naming a live process that holds no lock (a pid reused after a crash) does not block a start", async () => {
    // a live process unrelated to the database, as when a container's restart hands the old pid to another program
    const bystander = spawn("sleep", ["30"], { stdio: "ignore" });
    try {
      await writeFile(lockFileOf(dataDir), `${bystander.pid}\n`);
      const lock = await acquireDataDirLock(dataDir);
      await lock.release();
      // and the process's own pid in the file (a restart that got the same pid) does not block it either
      await writeFile(lockFileOf(dataDir), `${process.pid}\n`);
      const again = await acquireDataDirLock(dataDir);
      await again.release();
    } finally {
      bystander.kill("SIGKILL");
    }
  });

  it("in one process, a second opener is refused until the first releases", async () => {
    const lock = await acquireDataDirLock(dataDir);
    await expect(acquireDataDirLock(dataDir)).rejects.toThrow(
      `the embedded database in ${dataDir} is open already in this process (pid ${process.pid}). ${REFUSAL_TAIL}`,
    );
    await lock.release();
    await lock.release(); // twice is harmless
    const again = await acquireDataDirLock(dataDir);
    await again.release();
  });

  it("an embedded database held by a process killed with SIGKILL opens in the next process", async () => {
    const server = holder("database", dataDir);
    holders.push(server);
    expect(await server.answer).toEqual({ won: true, pid: server.child.pid });
    const cli = holder("database", dataDir);
    holders.push(cli);
    expect(await cli.answer).toMatchObject({ won: false, error: "DataDirLockedError" });
    await expect(openDatabase({ dataDir, migrate: false })).rejects.toThrow(DataDirLockedError);

    server.child.kill("SIGKILL");
    await server.exited;
    const db = await openDatabase({ dataDir, migrate: false });
    try {
      expect(await db.prisma.$queryRaw`SELECT 1 AS one`).toEqual([{ one: 1 }]);
    } finally {
      await db.close();
    }
  }, 60_000);
});
