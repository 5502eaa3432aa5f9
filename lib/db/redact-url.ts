/**
 * A URL fit to show on the status page, in the health answer and in logs: scheme, host, port and
 * path only. User info and the query string are dropped, since both can carry credentials
 * (`postgresql://user:pw@host/db`, `redis://:pw@host`, `?password=…`, `?sslkey=…`), and so is the
 * fragment. Anything that does not parse as a URL is not shown at all.
 */
export function redactUrl(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return "(unparseable URL)";
  }
  return `${u.protocol}//${u.host}${u.pathname}`;
}
