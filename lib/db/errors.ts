/**
 * A unique violation, however the driver reports it: Prisma's P2002 (model queries through
 * adapter-pg), or PostgreSQL's SQLSTATE 23505 in the chain of causes (raw queries: P2010 with the
 * adapter's error in meta; the PGlite adapter).
 */
export function isUniqueViolation(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 6; depth++) {
    const o = e as { code?: unknown; meta?: { code?: unknown; driverAdapterError?: unknown }; cause?: unknown; originalCode?: unknown };
    if (o.code === "P2002" || o.code === "23505" || o.originalCode === "23505" || o.meta?.code === "23505") return true;
    // raw queries: P2010 carrying the adapter's error, whose cause has the SQLSTATE
    e = o.meta?.driverAdapterError ?? o.cause;
  }
  return false;
}

/** Prisma's codes for a database it cannot reach or talk to (not for what a query did). */
const PRISMA_CONNECTION_CODES = new Set(["P1001", "P1002", "P1008", "P1017", "P2024"]);

/** The driver adapters' kinds for the same (@prisma/driver-adapter-utils). */
const ADAPTER_CONNECTION_KINDS = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections", "TlsConnectionError"]);

/**
 * PostgreSQL's SQLSTATEs for a server that cannot serve now: connection exceptions (class 08),
 * shutting down or starting up (57P01-57P03), too many connections (53300).
 */
const SERVER_UNAVAILABLE_STATES = /^(08...|57P0[123]|53300)$/;

/** The socket errors of a connection refused, reset, or timed out. */
const SOCKET_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN", "ENOTCONN"]);

/**
 * What node-postgres (pg) and ioredis say when the connection broke or could not be made; they
 * report these as plain Errors without a code.
 */
const CONNECTION_MESSAGES = [
  /^Connection terminated/, // pg: "… unexpectedly", "… due to connection timeout"
  /^timeout exceeded when trying to connect/, // pg.Pool
  /^Client has encountered a connection error and is not queryable/, // pg
  /^Client was closed and is not queryable/, // pg
  /^Connection is closed\.?$/, // ioredis
  /^Stream isn't writeable and enableOfflineQueue options is false/, // ioredis
  /^Reached the max retries per request limit/, // ioredis MaxRetriesPerRequestError
  /^None of startup nodes is available/, // ioredis Cluster
];

/**
 * Whether an error means the database or the key store could not be reached or dropped the
 * connection (a restart, a failover, a cut network) — something a retry shortly may not meet —
 * rather than anything a request did. Follows the chain of causes (Prisma's adapter error
 * included) however the driver reports it.
 */
export function isConnectionFailure(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 8; depth++) {
    const o = e as {
      code?: unknown;
      kind?: unknown;
      name?: unknown;
      message?: unknown;
      meta?: { driverAdapterError?: unknown };
      cause?: unknown;
      originalCode?: unknown;
    };
    if (typeof o.code === "string" && (PRISMA_CONNECTION_CODES.has(o.code) || SOCKET_CODES.has(o.code) || SERVER_UNAVAILABLE_STATES.test(o.code))) return true;
    if (typeof o.originalCode === "string" && SERVER_UNAVAILABLE_STATES.test(o.originalCode)) return true;
    if (typeof o.kind === "string" && ADAPTER_CONNECTION_KINDS.has(o.kind)) return true;
    if (o.name === "MaxRetriesPerRequestError" || o.name === "ClusterAllFailedError") return true;
    if (typeof o.message === "string" && CONNECTION_MESSAGES.some((m) => m.test(o.message as string))) return true;
    e = o.meta?.driverAdapterError ?? o.cause;
  }
  return false;
}
