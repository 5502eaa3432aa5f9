import type { IncomingMessage, ServerResponse } from "node:http";
import type { HeaderSource, HttpAnswer } from "./answer";
import { SECURITY_HEADERS } from "./security-headers";

/**
 * A node:http request's headers looked up as a Fetch `Headers` would answer: repeated headers are
 * joined with ", " (node:http itself keeps only the first of some, such as Authorization). Reads
 * `rawHeaders` at each lookup: the gateway asks for a handful of names, and building node's
 * `headers` or `headersDistinct` objects (every header, lower-cased, merged) costs more than that.
 */
export function nodeHeaders(req: IncomingMessage): HeaderSource {
  const raw = req.rawHeaders;
  return {
    get(name) {
      const wanted = name.toLowerCase();
      let value: string | null = null;
      for (let i = 0; i < raw.length; i += 2) {
        const candidate = raw[i];
        if (candidate.length !== wanted.length || candidate.toLowerCase() !== wanted) continue;
        value = value === null ? raw[i + 1] : `${value}, ${raw[i + 1]}`;
      }
      return value;
    },
    count(name) {
      const wanted = name.toLowerCase();
      let n = 0;
      for (let i = 0; i < raw.length; i += 2) {
        const candidate = raw[i];
        if (candidate.length === wanted.length && candidate.toLowerCase() === wanted) n++;
      }
      return n;
    },
  };
}

/**
 * The whole body when node:http has already parsed all of it (a handler that awaited I/O first
 * finds a small body complete): at most `max` bytes, read without waiting for events. Undefined
 * when the body is still arriving (always so in the request event itself), or larger than `max`:
 * then readAtMost() and drain() take it.
 */
export function completeBody(req: IncomingMessage, max: number): Buffer | undefined {
  if (!req.complete || req.readableLength > max || req.readableFlowing) return undefined;
  const chunk = req.read() as Buffer | null;
  return chunk ?? Buffer.alloc(0);
}

/** Whether the whole body has been read (nothing for drain() to do): the connection can be kept. */
export function bodyConsumed(req: IncomingMessage): boolean {
  return req.readableEnded || (req.complete && req.readableLength === 0);
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
  // a flat [name, value, …] list: node:http takes it as it is, without copying an object
  const headers: string[] = [];
  for (const name in answer.headers) headers.push(name, answer.headers[name]);
  for (const name in SECURITY_HEADERS) headers.push(name, SECURITY_HEADERS[name]);
  headers.push("Content-Length", String(Buffer.byteLength(answer.body)));
  if (options.close) headers.push("Connection", "close");
  res.writeHead(answer.status, headers);
  res.end(answer.body);
}
