import { mkdir, open, readFile, rm } from "node:fs/promises";
import path from "node:path";

/**
 * PGlite takes no lock of its own, and two processes writing one data directory corrupt it without
 * an error. Whoever opens the embedded database holds this lock file (with its pid) until it closes.
 */
export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(
      `the embedded database in ${dataDir} is open in another process (pid ${pid}). ` +
        `Stop that process, or run this command through the running server, or set DATABASE_URL to use a PostgreSQL server.`,
    );
    this.name = "DataDirLockedError";
  }
}

export interface DataDirLock {
  release(): Promise<void>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

export async function acquireDataDirLock(dataDir: string): Promise<DataDirLock> {
  const parent = path.dirname(path.resolve(dataDir));
  await mkdir(parent, { recursive: true });
  const file = path.resolve(dataDir) + ".lock";
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(file, "wx", 0o600);
      await handle.writeFile(String(process.pid));
      await handle.close();
      let released = false;
      return {
        async release() {
          if (released) return;
          released = true;
          await rm(file, { force: true });
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const pid = Number((await readFile(file, "utf8").catch(() => "")).trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) {
        throw new DataDirLockedError(dataDir, pid);
      }
      if (pid === process.pid) throw new DataDirLockedError(dataDir, pid);
      // the holder died without releasing: the lock is stale
      await rm(file, { force: true });
    }
  }
  throw new Error(`could not take the lock on ${dataDir}`);
}
