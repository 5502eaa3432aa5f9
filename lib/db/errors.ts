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
