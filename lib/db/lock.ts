import { closeSync, constants, ftruncateSync, openSync, readFileSync, writeSync } from "node:fs";
import path from "node:path";
import { tryLock, unlock } from "fs-native-extensions";
import { makePrivateDir } from "./private-files";

/**
 * PGlite takes no lock of its own, and two processes writing one data directory corrupt it without
 * an error. Whoever opens the embedded database holds an exclusive lock on `<dataDir>.lock` until it
 * closes. The lock is the operating system's (an open-file-description lock on Linux, flock on
 * macOS, LockFileEx on Windows), not the file's content: the OS drops it when the holder closes the
 * file or dies in any way, SIGKILL included, so a crash never leaves a stale lock and a pid that a
 * new process happens to reuse blocks nothing. The pid written into the file only names the holder
 * in the message a refused opener shows.
 */
export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    /** the holder's pid as it wrote it, when it could be read */
    readonly pid: number | null,
  ) {
    super(
      (pid === process.pid
        ? `the embedded database in ${dataDir} is open already in this process (pid ${pid}). `
        : `the embedded database in ${dataDir} is open in another process${pid ? ` (pid ${pid})` : ""}. `) +
        `Stop that process, or run this command through the running server, or set DATABASE_URL to use a PostgreSQL server.`,
    );
    this.name = "DataDirLockedError";
  }
}

export interface DataDirLock {
  release(): Promise<void>;
}

export function lockFileOf(dataDir: string): string {
  return path.resolve(dataDir) + ".lock";
}

function readHolderPid(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, "utf8").trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Takes the data directory's lock without waiting, or throws DataDirLockedError. The lock file is
 * never deleted, on release either: removing it while another process has it open would let that
 * process lock a file nobody else can find, and a third one create a new file and lock it too.
 */
export async function acquireDataDirLock(dataDir: string): Promise<DataDirLock> {
  const file = lockFileOf(dataDir);
  await makePrivateDir(path.dirname(file));
  // A plain descriptor, not a FileHandle: a FileHandle is closed when it is garbage collected, which
  // would drop the lock while the database is still open. Node opens files close-on-exec, so child
  // processes do not inherit it.
  const fd = openSync(file, constants.O_RDWR | constants.O_CREAT, 0o600);
  let granted: boolean;
  try {
    granted = tryLock(fd);
  } catch (err) {
    closeSync(fd);
    throw new Error(`cannot lock ${file}: ${(err as Error).message}`, { cause: err });
  }
  if (!granted) {
    closeSync(fd);
    throw new DataDirLockedError(dataDir, readHolderPid(file));
  }
  try {
    ftruncateSync(fd, 0);
    writeSync(fd, `${process.pid}\n`, 0);
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      try {
        // an empty file says "nobody" to the next reader; the unlock below is what frees it
        ftruncateSync(fd, 0);
        unlock(fd);
      } finally {
        closeSync(fd);
      }
    },
  };
}
