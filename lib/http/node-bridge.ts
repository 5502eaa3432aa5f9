import type { IncomingMessage, ServerResponse } from "node:http";

/**
 * A node:http request as a Fetch `Request`, so handlers written for route handlers serve it as they
 * are. At most `limit + 1` body bytes are read: enough for the handler to refuse an oversized body
 * (413) without holding it; answer such a request with `Connection: close`.
 */
export async function toWebRequest(req: IncomingMessage, limit: number): Promise<{ request: Request; truncated: boolean }> {
  const headers = new Headers();
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i].toLowerCase();
    // the body handed on is already complete: how it was framed on the wire does not apply to it
    if (name === "transfer-encoding" || name === "connection" || name === "keep-alive") continue;
    headers.append(name, req.rawHeaders[i + 1]);
  }
  const declared = Number(req.headers["content-length"]);
  let truncated = declared > limit;
  let body: Buffer | null = null;
  if (!truncated) {
    const read = await readAtMost(req, limit + 1);
    truncated = read.length > limit;
    body = read;
    if (truncated) headers.delete("content-length");
    else if (body.length > 0) headers.set("content-length", String(body.length));
  }
  const url = new URL(req.url ?? "/", "http://localhost");
  const bytes = body && body.length > 0 ? new Uint8Array(body) : null;
  const request = new Request(url, { method: req.method, headers, body: bytes });
  return { request, truncated };
}

/**
 * Reads the body until its end or until `max` bytes, then pauses the stream: node:http discards
 * the rest once the answer is sent, and closes the connection when the answer says so.
 */
function readAtMost(req: IncomingMessage, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (err?: Error) => {
      req.off("data", onData).off("end", onEnd).off("error", onError).off("close", onClose);
      if (err) reject(err);
      else resolve(Buffer.concat(chunks));
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

/** Writes a Fetch `Response` (status, headers, body) to a node:http response. */
export async function sendWebResponse(res: ServerResponse, response: Response, closeConnection = false): Promise<void> {
  const body = Buffer.from(await response.arrayBuffer());
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    if (name === "set-cookie") return;
    headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  headers["content-length"] = String(body.length);
  if (closeConnection) headers["connection"] = "close";
  res.writeHead(response.status, headers);
  res.end(body);
}
