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
 * Reads the body until its end or until `max` bytes, then pauses: what is left is for drain().
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
 * Reads and discards what is left of the body, up to `maxBytes` more and for at most `maxMs`.
 * A client still sending a body it was refused (413) only reads the answer once it has sent it:
 * closing the connection under it would reset it and lose the answer. Resolves true when the body
 * ended (the connection can be kept), false when a limit was reached or the client went away.
 */
export function drain(req: IncomingMessage, limits: { maxBytes: number; maxMs: number }): Promise<boolean> {
  if (req.readableEnded) return Promise.resolve(true);
  return new Promise((resolve) => {
    let size = 0;
    const finish = (ended: boolean) => {
      clearTimeout(timer);
      req.off("data", onData).off("end", onEnd).off("error", onGone).off("close", onGone);
      if (!ended) req.pause();
      resolve(ended);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limits.maxBytes) finish(false);
    };
    const onEnd = () => finish(true);
    const onGone = () => finish(false);
    const timer = setTimeout(() => finish(false), limits.maxMs);
    req.on("data", onData).on("end", onEnd).on("error", onGone).on("close", onGone);
    req.resume();
  });
}

/** Writes an answer; `close` ends the connection after it (a body left unread). */
export function writeAnswer(res: ServerResponse, answer: HttpAnswer, options: { close: boolean }): void {
  const headers: Record<string, string> = { ...answer.headers, "Content-Length": String(Buffer.byteLength(answer.body)) };
  if (options.close) headers.Connection = "close";
  res.writeHead(answer.status, headers);
  res.end(answer.body);
}
