import { hash, randomBytes, timingSafeEqual } from "node:crypto";
import { readFile, rename, rm, writeFile } from "node:fs/promises";
import path from "node:path";

// The embedded database belongs to the server that runs on it (lib/db/lock.ts), so the command line
// reaches that database through the server. A server on the embedded database publishes where it
// listens and a credential of its own in `<dataDir>/server.json` (mode 600, like credentials.txt and
// the generated secret): whoever may read the data directory may use it, and whoever may read the
// data directory could read the database itself. The credential is 256 random bits, new at every
// start, valid for that process only and only for what the CLI sends through the server (API
// tokens); the server keeps its SHA-256 and nothing else.

export const CLI_TOKEN_PREFIX = "idgl_";
export const SERVER_FILE = "server.json";
/** The header in which the CLI names its actor (`cli:<user>@<host>`, URI-encoded) for the audit trail. */
export const CLI_ACTOR_HEADER = "idemgate-actor";

/** What a running server publishes for the command line. */
export interface ServerAccess {
  /** the server's process id: the one that holds the data directory's lock */
  pid: number;
  /** where it listens, on this machine, e.g. http://127.0.0.1:3000 */
  url: string;
  /** the bearer credential for the CLI's requests */
  token: string;
}

const holder = globalThis as unknown as { __idemgateCliAccess?: { digest: Buffer } };

function digestOf(token: string): Buffer {
  return hash("sha256", token, "buffer");
}

export function serverFileOf(dataDir: string): string {
  return path.join(dataDir, SERVER_FILE);
}

/**
 * The URL through which a process on this machine reaches a server bound to `address`: the loopback
 * address of its family when it listens on every interface, else the address itself.
 */
export function localUrl(address: { address: string; family: string; port: number }): string {
  const host = address.address === "0.0.0.0" ? "127.0.0.1" : address.address === "::" ? "::1" : address.address;
  return `http://${host.includes(":") ? `[${host}]` : host}:${address.port}`;
}

/**
 * Publishes this server's address and a fresh CLI credential in the data directory (written to a
 * temporary file with mode 600 and renamed into place, so a reader never sees half of it). Returns
 * the function that takes it down again at shutdown (only while the file is still this process's).
 */
export async function publishServerAccess(dataDir: string, url: string): Promise<() => Promise<void>> {
  const token = CLI_TOKEN_PREFIX + randomBytes(32).toString("base64url");
  const file = serverFileOf(dataDir);
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, JSON.stringify({ pid: process.pid, url, token } satisfies ServerAccess) + "\n", { mode: 0o600 });
  await rename(temporary, file);
  holder.__idemgateCliAccess = { digest: digestOf(token) };
  return async () => {
    holder.__idemgateCliAccess = undefined;
    const published = await readServerAccess(dataDir);
    if (published?.pid === process.pid) await rm(file, { force: true });
  };
}

/** Whether a bearer token is meant as the CLI's credential (checked by verifyCliToken). */
export function isCliToken(token: string): boolean {
  return token.startsWith(CLI_TOKEN_PREFIX);
}

/** True when `token` is the credential this server process published. */
export function verifyCliToken(token: string): boolean {
  const published = holder.__idemgateCliAccess;
  if (!published || !isCliToken(token) || token.length > 200) return false;
  return timingSafeEqual(digestOf(token), published.digest);
}

/**
 * The actor the CLI named for the audit trail, or null when the header is missing or is not a
 * `cli:` actor (a CLI principal never acts under an operator's or a token's name).
 */
export function cliActorFrom(header: string | null): string | null {
  if (!header) return null;
  let actor: string;
  try {
    actor = decodeURIComponent(header);
  } catch {
    return null;
  }
  return /^cli:[^\s\x00-\x1f\x7f]{1,200}$/u.test(actor) ? actor : null;
}

/** What a server published in `dataDir`, or null when there is no readable, well-formed file. */
export async function readServerAccess(dataDir: string): Promise<ServerAccess | null> {
  let text: string;
  try {
    text = await readFile(serverFileOf(dataDir), "utf8");
  } catch {
    return null;
  }
  try {
    const value = JSON.parse(text) as Partial<ServerAccess>;
    if (typeof value.pid === "number" && typeof value.url === "string" && typeof value.token === "string" && isCliToken(value.token)) {
      return { pid: value.pid, url: value.url, token: value.token };
    }
  } catch {
    // a file another version wrote, or a damaged one: as good as none
  }
  return null;
}
