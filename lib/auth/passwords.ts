import { availableParallelism } from "node:os";
import { hash, verify } from "@node-rs/argon2";
import { IdemgateError } from "@/lib/idempotency/errors";

// OWASP's argon2id baseline: 19 MiB, 2 passes, 1 lane.
const OPTIONS = { memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

export const MIN_PASSWORD_LENGTH = 12;

/** Refused at once: the process is hashing as many passwords as it allows, with a full queue. */
export class PasswordCheckBusyError extends IdemgateError {
  readonly code = "password_check_busy";
  constructor() {
    super("too many password checks at once; try again in a few seconds");
    this.name = "PasswordCheckBusyError";
  }
}

/**
 * Bounds the password hashing of one process. Each argon2 computation takes 19 MiB and most of a
 * core, and sign-in is open to anyone who reaches the server: without a bound, a burst of sign-ins
 * (for unknown emails too, which cost the same dummy verification) would take every core and as
 * much memory as it likes. At most `maxRunning` run at once, `maxWaiting` more wait for a turn in
 * arrival order, and any call beyond those is refused at once with PasswordCheckBusyError rather
 * than queued without end.
 */
export class HashingGate {
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  /** for tests and diagnostics: the most computations that ran at once, how many ran, how many were turned away */
  peakRunning = 0;
  started = 0;
  refused = 0;

  constructor(
    readonly maxRunning: number,
    readonly maxWaiting: number,
  ) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.running < this.maxRunning) {
      this.running++;
    } else if (this.waiting.length < this.maxWaiting) {
      // the call that finishes hands its slot over without freeing it, so nobody can slip in between
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.refused++;
      throw new PasswordCheckBusyError();
    }
    this.peakRunning = Math.max(this.peakRunning, this.running);
    this.started++;
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

// One gate per process, on globalThis: the server loads this module in more than one bundle.
const holder = globalThis as unknown as { __idemgateHashingGate?: HashingGate };
const CORES = Math.max(1, availableParallelism());

/** The process's gate: as many at once as there are cores, four times that waiting. */
export function passwordHashingGate(): HashingGate {
  return (holder.__idemgateHashingGate ??= new HashingGate(CORES, 4 * CORES));
}

export function hashPassword(password: string, gate: HashingGate = passwordHashingGate()): Promise<string> {
  return gate.run(() => hash(password, OPTIONS));
}

/** False for a wrong password or a malformed hash; throws PasswordCheckBusyError when the gate is full. */
export async function verifyPassword(passwordHash: string, password: string, gate: HashingGate = passwordHashingGate()): Promise<boolean> {
  return gate.run(async () => {
    try {
      return await verify(passwordHash, password);
    } catch {
      return false;
    }
  });
}
