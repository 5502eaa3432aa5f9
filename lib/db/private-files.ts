import { chmod, lstat, mkdir, readdir, stat } from "node:fs/promises";
import path from "node:path";

/**
 * The data directory holds every tenant's results and kept arguments, password and token hashes and
 * the session secret: it and everything in it are the owner's only, whatever the umask. PGlite sets
 * its files' modes itself (0666 for the database it unpacks on a first start, 0644 for files
 * PostgreSQL opens with fopen), so a umask alone does not keep them private: the tree is walked and
 * tightened after the database opens and when it closes, and now and then while it is open. The
 * directory's own 0700 is what keeps other users out in between (they cannot enter it to reach a file).
 */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

const tightened = (mode: number, dir: boolean) => (dir ? PRIVATE_DIR_MODE : mode & PRIVATE_FILE_MODE);

/** Whether modes mean anything here (Windows keeps no POSIX modes). */
const POSIX = process.platform !== "win32";

/**
 * Narrows `root` (a directory or a file) and everything under it to 0700 (directories) and at most
 * 0600 (files); symbolic links are left alone and not followed. Entries that vanish meanwhile (the
 * database's temporary files) are skipped. Resolves to how many modes it changed.
 */
export async function tightenModes(root: string): Promise<number> {
  if (!POSIX) return 0;
  let changed = 0;
  const pending = [root];
  while (pending.length > 0) {
    const item = pending.pop()!;
    let info;
    try {
      // the root as named (it may be a link to where the data lives); what is under it, never followed
      info = item === root ? await stat(item) : await lstat(item);
    } catch (err) {
      if (isGone(err)) continue;
      throw err;
    }
    if (!info.isDirectory() && !info.isFile()) continue;
    const mode = info.mode & 0o777;
    const wanted = tightened(mode, info.isDirectory());
    if (mode !== wanted) {
      try {
        await chmod(item, wanted);
        changed++;
      } catch (err) {
        if (!isGone(err)) throw err;
      }
    }
    if (info.isDirectory()) {
      try {
        for (const name of await readdir(item)) pending.push(path.join(item, name));
      } catch (err) {
        if (!isGone(err)) throw err;
      }
    }
  }
  return changed;
}

/** `mkdir -p` whose new directories are 0700 whatever the umask. */
export async function makePrivateDir(dir: string): Promise<void> {
  const created = await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  // mkdir's mode is narrowed by the umask, never widened: only a umask that takes the owner's bits
  // leaves a new directory wider than needed or unusable; set it exactly
  if (created !== undefined && POSIX) await chmod(dir, PRIVATE_DIR_MODE);
}

/**
 * At start: creates the data directory 0700 when `create` (the embedded database goes in it), or
 * tightens an existing one and everything in it, saying so on stderr when it was open to others.
 */
export async function securePrivateDataDir(dataDir: string, options: { create: boolean; log?: (line: string) => void }): Promise<void> {
  const exists = await stat(dataDir).then(
    (s) => s.isDirectory(),
    (err) => (isGone(err) ? false : Promise.reject(err)),
  );
  if (!exists) {
    if (options.create) await makePrivateDir(dataDir);
    return;
  }
  const changed = await tightenModes(dataDir);
  if (changed > 0) {
    (options.log ?? console.error)(
      `idemgate: the data directory ${dataDir} was open to other users: ${changed} ${changed === 1 ? "mode" : "modes"} narrowed to 0700 (directories) and 0600 (files)`,
    );
  }
}

function isGone(err: unknown): boolean {
  return (err as NodeJS.ErrnoException)?.code === "ENOENT";
}
