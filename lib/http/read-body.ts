import type { HeaderSource } from "./answer";
import { HttpError, badRequest } from "./problem";

export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Reads a JSON request body of at most `limit` bytes, refusing larger ones before parsing (and,
 * when Content-Length says so, before reading). An empty body is `undefined`.
 */
export async function readJsonBody(request: Request, limit = MAX_BODY_BYTES): Promise<unknown> {
  checkJsonHeaders(request.headers, limit);
  if (!request.body) return undefined;
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  return parseJsonBytes(Buffer.concat(chunks), limit);
}

/** What can be refused from the headers alone: a declared size over `limit`, a type that is not JSON. */
export function checkJsonHeaders(headers: HeaderSource, limit = MAX_BODY_BYTES): void {
  const declared = headers.get("content-length");
  if (declared !== null && Number(declared) > limit) throw tooLarge(limit);
  const type = headers.get("content-type");
  if (type && !/^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i.test(type)) {
    throw new HttpError("unsupported_media_type", 415, `send the arguments as application/json, not ${type.slice(0, 100)}`);
  }
}

/** A whole body's bytes as JSON: over `limit` is a 413, empty or blank is `undefined`. */
export function parseJsonBytes(bytes: Uint8Array, limit = MAX_BODY_BYTES): unknown {
  if (bytes.byteLength > limit) throw tooLarge(limit);
  if (bytes.byteLength === 0) return undefined;
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw badRequest("invalid_json", "the body is not valid UTF-8");
  }
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw badRequest("invalid_json", `the body is not valid JSON: ${(err as Error).message}`);
  }
}

function tooLarge(limit: number): HttpError {
  return new HttpError("payload_too_large", 413, `the body is larger than ${limit} bytes`);
}
