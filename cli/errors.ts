import { InvalidScopeError } from "@/lib/auth/api-tokens";
import { OperatorInputError } from "@/lib/auth/operators";
import { IdemgateApiError } from "@/lib/client/index";
import { DataDirLockedError } from "@/lib/db/lock";
import { isIdemgateError } from "@/lib/idempotency/errors";

/** A mistake the user can fix: shown as one line, no stack trace. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = "CliError";
  }
}

const EXPECTED: (new (...args: never[]) => Error)[] = [CliError, DataDirLockedError, OperatorInputError, InvalidScopeError, IdemgateApiError];

/** Expected errors are their message; anything else is a bug and keeps its stack. */
export function describeError(err: unknown): { text: string; exitCode: number } {
  const exitCode = err instanceof CliError ? err.exitCode : 1;
  if (err instanceof Error && EXPECTED.some((type) => err instanceof type)) return { text: err.message, exitCode };
  // the engine's refusals (a key that is not stuck, a missing reason) are the user's to fix
  if (isIdemgateError(err)) return { text: err.message, exitCode };
  // loadConfig reports a bad environment as a readable multi-line message
  if (err instanceof Error && err.message.startsWith("invalid configuration:")) return { text: err.message, exitCode };
  if (err instanceof Error && isConnectionError(err)) return { text: `cannot reach the database: ${err.message}`, exitCode };
  if (err instanceof Error) return { text: `unexpected error: ${err.stack ?? err.message}`, exitCode };
  return { text: `unexpected error: ${String(err)}`, exitCode };
}

function isConnectionError(err: Error): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "ETIMEDOUT" || code === "3D000" || code === "28P01" || /connect ECONNREFUSED|timeout exceeded when trying to connect/i.test(err.message);
}
