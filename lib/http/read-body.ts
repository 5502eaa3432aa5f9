import { InvalidArgumentsError } from "@/lib/idempotency/errors";
import { MAX_JSON_DEPTH } from "@/lib/idempotency/fingerprint";
import type { HeaderSource } from "./answer";
import { scanJson } from "./json-limits";
import { badRequest, PayloadTooLargeError, UnsupportedMediaTypeError } from "./problem";

export const MAX_BODY_BYTES = 1024 * 1024;

/** Stateless between calls (no `stream` option), so one decoder serves every request. */
const UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Reads a JSON request body of at most `limit` bytes, refusing larger ones before parsing (and,
 * when Content-Length says so, before reading). An empty body is `undefined`.
 */
export async function readJsonBody(request: Request, limit = MAX_BODY_BYTES): Promise<unknown> {
  checkJsonHeaders(request.headers, limit);
  if (!request.body) return undefined;
  const bytes = await readCapped(request.body, limit);
  if (bytes === null) throw tooLarge(limit);
  return parseJsonBytes(bytes, limit);
}

/**
 * A stream's bytes, or null once they pass `limit` (the stream is then cancelled): memory stays
 * within about the limit, whatever the sender declared.
 */
export async function readCapped(body: ReadableStream<Uint8Array>, limit: number): Promise<Buffer | null> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, size);
}

/** What can be refused from the headers alone: a declared size over `limit`, a type that is not JSON. */
export function checkJsonHeaders(headers: HeaderSource, limit = MAX_BODY_BYTES): void {
  const declared = headers.get("content-length");
  if (declared !== null && Number(declared) > limit) throw tooLarge(limit);
  const type = headers.get("content-type");
  if (type && !/^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i.test(type)) {
    throw new UnsupportedMediaTypeError(`send the arguments as application/json, not ${type.slice(0, 100)}`);
  }
}

/**
 * A whole body's bytes as JSON: over `limit` is a 413, empty or blank is `undefined`. Refused with
 * a 400 as well (lib/http/json-limits.ts says why): nesting deeper than MAX_JSON_DEPTH (64) levels
 * (`invalid_json`, found before parsing), and integers beyond ±(2^53 − 1), which JSON.parse would
 * round (`invalid_arguments`, each with its path: send such numbers as strings).
 */
export function parseJsonBytes(bytes: Uint8Array, limit = MAX_BODY_BYTES): unknown {
  if (bytes.byteLength > limit) throw tooLarge(limit);
  if (bytes.byteLength === 0) return undefined;
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    throw badRequest("invalid_json", "the body is not valid UTF-8");
  }
  if (text.trim() === "") return undefined;
  const scan = scanJson(text, { maxDepth: MAX_JSON_DEPTH });
  if (scan.tooDeep) throw badRequest("invalid_json", `the body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw badRequest("invalid_json", `the body is not valid JSON: ${(err as Error).message}`);
  }
  if (scan.unsafeIntegers.length > 0) throw unsafeIntegers(scan.unsafeIntegers);
  return value;
}

function unsafeIntegers(found: { path: string; literal: string }[]): InvalidArgumentsError {
  const issues = found.map(({ path, literal }) => ({
    path,
    message: `${literal.length > 40 ? literal.slice(0, 40) + "…" : literal} is beyond ±(2^53 − 1) and would be rounded; send it as a string`,
  }));
  return new InvalidArgumentsError(
    `integers beyond ±(2^53 − 1) cannot be carried exactly (send them as strings): ${issues.map((i) => i.path).join(", ")}`,
    issues,
  );
}

function tooLarge(limit: number): PayloadTooLargeError {
  return new PayloadTooLargeError(`the body is larger than ${limit} bytes`);
}
