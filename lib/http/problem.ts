import { isConnectionFailure } from "@/lib/db/errors";
import { isIdemgateError, NotFoundError } from "@/lib/idempotency/errors";
import { isProblemCode, PROBLEMS, type ProblemEntry } from "@/lib/problems/problems";
import { toResponse, type HttpAnswer } from "./answer";
import { ForbiddenError, InvalidHeaderError, InvalidJsonError, InvalidRequestError, UnauthorizedError } from "./http-errors";

export * from "./http-errors";
// the table itself is lib/problems/problems.ts
export { PROBLEM_CODES, type ProblemHeader } from "@/lib/problems/problems";

export const unauthorized = (detail = "send an API token as `Authorization: Bearer <token>`") => new UnauthorizedError(detail);
export const forbidden = (detail: string) => new ForbiddenError(detail);
export const notFound = (detail: string) => new NotFoundError(detail);

const BAD_REQUESTS = { invalid_request: InvalidRequestError, invalid_header: InvalidHeaderError, invalid_json: InvalidJsonError };
export const badRequest = (code: keyof typeof BAD_REQUESTS, detail: string) => new BAD_REQUESTS[code](detail);

/** A problem type as the gateway answers it: the table's entry (lib/problems). */
export type ProblemType = ProblemEntry;

/** The problem type of a code; own entries only ("constructor" or "__proto__" is no problem type). */
export function problemInfo(code: string): ProblemType | undefined {
  return isProblemCode(code) ? PROBLEMS[code] : undefined;
}

/** The headers the gateway sends with an answer of this type (values only). */
function problemHeaders(info: ProblemType): Record<string, string> {
  return Object.fromEntries(Object.entries(info.headers ?? {}).map(([name, h]) => [name, h.value]));
}

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

export function problemResponse(status: number, body: ProblemBody, headers: Record<string, string> = {}): Response {
  return toResponse(problemParts(status, body, headers));
}

function problemParts(status: number, body: ProblemBody, headers: Record<string, string> = {}): HttpAnswer {
  return { status, headers: { "Content-Type": "application/problem+json", "Cache-Control": "no-store", ...headers }, body: JSON.stringify(body) };
}

/** Turns any thrown value into an RFC 9457 response; unknown errors become a 500 without details. */
export function errorResponse(err: unknown, instance?: string): Response {
  return toResponse(problemAnswer(err, instance));
}

/**
 * errorResponse's answer before it is a `Response`. An error thrown by the engine or the registry may
 * be an instance of another bundle's copy of its class, so it is recognized by isIdemgateError and
 * its code, and states itself what it adds to its type's answer (`problem`), never by `instanceof`.
 */
export function problemAnswer(err: unknown, instance?: string): HttpAnswer {
  if (isIdemgateError(err) && isProblemCode(err.code)) {
    const info = PROBLEMS[err.code];
    const details = err.problem;
    const status = details.status ?? info.status;
    const body: ProblemBody = { type: `/problems/${err.code}`, title: info.title, status, detail: err.message };
    if (instance) body.instance = instance;
    Object.assign(body, details.members);
    return problemParts(status, body, { ...problemHeaders(info), ...details.headers });
  }
  if (isConnectionFailure(err)) {
    // the database or the key store broke off (a restart, a failover): whatever path met it, the
    // caller is told to come back, never 500
    console.error(`idemgate: a database or key-store connection failed: ${err instanceof Error ? err.message.trim().split("\n").pop() : String(err)}`);
    const body: ProblemBody = { type: "/problems/unavailable", title: PROBLEMS.unavailable.title, status: 503, detail: "a service this request needs (the database, the key store) could not be reached; retry shortly with the same key" };
    if (instance) body.instance = instance;
    return problemParts(503, body, problemHeaders(PROBLEMS.unavailable));
  }
  console.error("unexpected error", err);
  return problemParts(500, { type: "/problems/internal", title: PROBLEMS.internal.title, status: 500, detail: "an unexpected error occurred; it has been logged", instance });
}
