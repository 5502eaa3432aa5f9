import { CLI_ACTOR_HEADER, readServerAccess, type ServerAccess } from "@/lib/auth/cli-access";
import { DataDirLockedError } from "@/lib/db/lock";
import { loadConfig } from "@/lib/server/config";
import type { Runtime } from "@/lib/server/runtime";
import { cliActor } from "./actor";
import { CliError } from "./errors";
import { withRuntime } from "./with-runtime";

/** How long the CLI waits for the running server's answer. */
const REQUEST_TIMEOUT_MS = 30_000;

/** A request to the running server that holds the embedded database, as the command line. */
export class RunningServer {
  constructor(readonly access: ServerAccess) {}

  /** Sends one request; the answer's JSON, or a CliError with the server's problem detail. */
  async request<T>(method: "GET" | "POST", path: string, body?: unknown): Promise<{ status: number; body: T }> {
    let res: Response;
    try {
      res = await fetch(new URL(path, this.access.url), {
        method,
        headers: {
          authorization: `Bearer ${this.access.token}`,
          [CLI_ACTOR_HEADER]: encodeURIComponent(cliActor()),
          accept: "application/json",
          ...(body !== undefined ? { "content-type": "application/json" } : {}),
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (err) {
      const cause = err instanceof Error ? ((err.cause as Error | undefined)?.message ?? err.message) : String(err);
      throw new CliError(`the server (pid ${this.access.pid}) holds the embedded database but does not answer at ${this.access.url}: ${cause}`);
    }
    const text = await res.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    if (!res.ok && res.status !== 404) {
      const problem = (parsed ?? {}) as { title?: string; detail?: string; errors?: { path: string; message: string }[] };
      const detail = problem.errors?.length ? problem.errors.map((e) => e.message).join("; ") : problem.detail;
      throw new CliError(`the server at ${this.access.url} refused: ${[problem.title ?? `HTTP ${res.status}`, detail].filter(Boolean).join(": ")}`);
    }
    return { status: res.status, body: parsed as T };
  }
}

/**
 * Runs a command on the database: opened directly (DATABASE_URL, or the embedded one when no server
 * holds it), or, while a server started with `npm start` holds the embedded database, through that
 * server with the credential it published in the data directory (lib/auth/cli-access.ts).
 */
export async function withDatabaseOrServer<T>(direct: (runtime: Runtime) => Promise<T>, throughServer: (server: RunningServer) => Promise<T>): Promise<T> {
  try {
    return await withRuntime(direct);
  } catch (err) {
    if (!(err instanceof DataDirLockedError)) throw err;
    const access = await readServerAccess(loadConfig().dataDir);
    // the file names the process that holds the lock: anything else is left over from an earlier start
    if (!access || access.pid !== err.pid) {
      throw new CliError(
        `${err.message.replace(/ Stop that process.*$/, "")} It publishes no address for the command line ` +
          `(a server started with \`npm start\` does, once it listens). Wait until it is ready, or stop it, or set DATABASE_URL to use a PostgreSQL server.`,
      );
    }
    return throughServer(new RunningServer(access));
  }
}
