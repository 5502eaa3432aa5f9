// Used by scripts/serve.mjs: RFC 9457 bodies for answers Node.js and Next.js make without one.
import { SECURITY_HEADERS } from "../lib/http/security-headers.mjs";

const problem = (code, title, status, detail) => JSON.stringify({ type: `/problems/${code}`, title, status, detail });

/**
 * A route handler answers a method it does not export with a bare 405 (Next.js): the answer gets
 * the problem body every other error of the API has. Wraps `res` before Next.js writes to it.
 */
export function problemFor405(req, res) {
  const { writeHead, write, end } = res;
  let replacing = false;
  res.writeHead = function (status, ...rest) {
    if (status === 405 || (status === undefined && res.statusCode === 405)) {
      replacing = true;
      res.removeHeader("Content-Length");
      res.setHeader("Content-Type", "application/problem+json");
      res.setHeader("Cache-Control", "no-store");
    }
    return writeHead.call(this, status, ...rest);
  };
  // Next.js sends no body with its 405; whatever it writes gives way to the problem
  res.write = function (chunk, ...rest) {
    if (!res.headersSent && res.statusCode === 405) res.writeHead(405);
    if (replacing) return true;
    return write.call(this, chunk, ...rest);
  };
  res.end = function (chunk, ...rest) {
    if (!res.headersSent && res.statusCode === 405) res.writeHead(405);
    if (replacing) {
      const callback = [chunk, ...rest].find((a) => typeof a === "function");
      return end.call(this, problem("method_not_allowed", "Method not allowed", 405, `${req.method} is not a method this path takes`), callback);
    }
    return end.call(this, chunk, ...rest);
  };
}

/**
 * What Node.js's parser refuses before any handler runs: header fields too large (431), or a
 * request it cannot parse (400). Node.js would answer these with a bare status line.
 */
export function answerClientError(err, socket) {
  if (!socket.writable || err.code === "ECONNRESET") {
    socket.destroy();
    return;
  }
  const [status, body] =
    err.code === "HPE_HEADER_OVERFLOW"
      ? [431, problem("headers_too_large", "Request header fields too large", 431, "the request's header fields are larger than the server reads; nothing was read or run")]
      : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? [408, problem("request_timeout", "Request timeout", 408, "the request did not arrive whole in the time the server allows; nothing was run")]
        : [400, problem("invalid_request", "Invalid request", 400, "the request could not be parsed as HTTP/1.1")];
  const reason = status === 431 ? "Request Header Fields Too Large" : status === 408 ? "Request Timeout" : "Bad Request";
  const headers = { ...SECURITY_HEADERS, "Content-Type": "application/problem+json", "Cache-Control": "no-store", "Content-Length": Buffer.byteLength(body), Connection: "close" };
  socket.end(`HTTP/1.1 ${status} ${reason}\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join("\r\n")}\r\n\r\n${body}`);
}
