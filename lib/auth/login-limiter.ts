import "server-only";

/**
 * Failed sign-ins per email and client address, kept in this process's memory: enough to slow down
 * password guessing against one account from one place. A restart forgets; several server processes
 * each count on their own.
 */
export const MAX_FAILURES = 10;
export const WINDOW_MS = 15 * 60 * 1000;
const MAX_TRACKED = 10_000;

interface Entry {
  failures: number[];
}

const holder = globalThis as unknown as { __idemgateLoginFailures?: Map<string, Entry> };
const failures = (holder.__idemgateLoginFailures ??= new Map());

function keyOf(email: string, ip: string): string {
  return `${email.trim().toLowerCase()}|${ip}`;
}

function recent(entry: Entry | undefined, nowMs: number): number[] {
  return entry ? entry.failures.filter((t) => t > nowMs - WINDOW_MS) : [];
}

/** Milliseconds until the next attempt is allowed; 0 when it is allowed now. */
export function loginBlockedForMs(email: string, ip: string, nowMs = Date.now()): number {
  const times = recent(failures.get(keyOf(email, ip)), nowMs);
  if (times.length < MAX_FAILURES) return 0;
  return times[times.length - MAX_FAILURES] + WINDOW_MS - nowMs;
}

export function recordLoginFailure(email: string, ip: string, nowMs = Date.now()): void {
  const key = keyOf(email, ip);
  const times = recent(failures.get(key), nowMs);
  times.push(nowMs);
  failures.delete(key);
  failures.set(key, { failures: times.slice(-MAX_FAILURES) });
  // oldest entries first (Map keeps insertion order): drop them instead of growing without bound
  while (failures.size > MAX_TRACKED) failures.delete(failures.keys().next().value!);
}

export function clearLoginFailures(email: string, ip: string): void {
  failures.delete(keyOf(email, ip));
}
