import type { IncomingMessage, ServerResponse } from "node:http";
import type { HeaderSource, HttpAnswer } from "./answer";

/**
 * A node:http request's headers looked up as a Fetch `Headers` would answer: repeated headers are
 * joined with ", " (node:http itself keeps only the first of some, such as Authorization).
 */
export function nodeHeaders(req: IncomingMessage): HeaderSource {
  return {
    get(name) {
      const values = req.headersDistinct[name.toLowerCase()];
      return values === undefined ? null : values.join(", ");
    },
  };
}

/**
 * Reads the body until its end or until `max` bytes, then pauses: node:http discards the rest once
 * the answer is out (answer such a request with `Connection: close`, see writeAnswer).
 */
export function readAtMost(req: IncomingMessage, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (err?: Error) => {
      req.off("data", onData).off("end", onEnd).off("error", onError).off("close", onClose);
      if (err) reject(err);
      else resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= max) {
        req.pause();
        finish();
      }
    };
    const onEnd = () => finish();
    const onError = (err: Error) => finish(err);
    const onClose = () => finish(new Error("the client closed the connection before the body ended"));
    req.on("data", onData).on("end", onEnd).on("error", onError).on("close", onClose);
  });
}

/**
 * Writes an answer. A request whose body was not read to its end gets `Connection: close`: what is
 * left of it is not worth reading to keep the connection.
 */
export function writeAnswer(req: IncomingMessage, res: ServerResponse, answer: HttpAnswer): void {
  const headers: Record<string, string> = { ...answer.headers, "Content-Length": String(Buffer.byteLength(answer.body)) };
  if (!req.complete) headers.Connection = "close";
  res.writeHead(answer.status, headers);
  res.end(answer.body);
}
