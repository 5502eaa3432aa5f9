// Used by scripts/serve.mjs before a request reaches Next.js.

/**
 * Whether the path of a request target is not valid percent-encoding (a bare "%", an escape that is
 * not UTF-8): Next.js answers such a path with a bare 500, so the server answers it itself.
 */
export function undecodablePath(target) {
  const path = (target ?? "/").split("?")[0];
  try {
    decodeURIComponent(path);
    return false;
  } catch {
    return true;
  }
}

/** What names nothing because its path cannot be decoded: a problem+json 404 for the API, the not-found page otherwise. */
export function answerUndecodablePath(req, res) {
  const path = (req.url ?? "/").split("?")[0];
  if (/^\/(api|mcp)(\/|$)/.test(path)) {
    const body = JSON.stringify({ type: "/problems/not_found", title: "Not found", status: 404, detail: "the path is not valid percent-encoding" });
    res.writeHead(404, { "Content-Type": "application/problem+json", "Content-Length": Buffer.byteLength(body) });
    res.end(body);
    return true;
  }
  // Next.js renders its not-found page for this path, with a 404
  req.url = "/_not-found";
  return false;
}
