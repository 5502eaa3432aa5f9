import type { z } from "zod";
import { InvalidArgumentsError } from "@/lib/idempotency/errors";
import { readJsonBody } from "./read-body";

function invalid(what: string, error: z.ZodError): InvalidArgumentsError {
  const issues = error.issues.map((i) => ({ path: i.path.length ? i.path.join(".") : "(body)", message: i.message }));
  return new InvalidArgumentsError(`invalid ${what}: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`, issues);
}

/** A JSON body validated by a zod schema; a problem is a 400 listing each issue. */
export async function parseBody<S extends z.ZodType>(request: Request, schema: S, limit = 256 * 1024): Promise<z.output<S>> {
  const parsed = schema.safeParse((await readJsonBody(request, limit)) ?? {});
  if (!parsed.success) throw invalid("body", parsed.error);
  return parsed.data;
}

export function parseQuery<S extends z.ZodType>(request: Request, schema: S): z.output<S> {
  const raw = Object.fromEntries([...new URL(request.url).searchParams.entries()].filter(([, v]) => v !== ""));
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw invalid("query", parsed.error);
  return parsed.data;
}
