/**
 * The platform's fetch, for the requests Idemgate makes to the services it stands in front of (HTTP
 * tools' status URLs, MCP servers; HTTP tools' calls go over node:http, lib/tools/upstream-http.ts)
 * and to webhook endpoints. In the production server Next.js
 * replaces `globalThis.fetch` with wrappers for rendering pages (its data cache, de-duplication of
 * equal requests, tracing); a tool call is none of those, and the wrappers cost every upstream call
 * about 0.2 ms of CPU (they build a Request of their own to decide whether to cache it). The server
 * keeps the platform's fetch before Next.js loads (scripts/serve.mjs, {@link PLATFORM_FETCH});
 * elsewhere (tests, `next dev`) the function Next.js's outer wrapper stands for
 * (`_nextOriginalFetch`: its de-duplicating wrapper, which passes a POST or a request with a signal
 * straight through) or `globalThis.fetch` as it is at the call, so a test's stub is the one used.
 */
export const PLATFORM_FETCH = Symbol.for("idemgate.platformFetch");

type Wrapped = typeof fetch & { _nextOriginalFetch?: typeof fetch };

export const outboundFetch: typeof fetch = (input, init) => {
  const kept = (globalThis as { [PLATFORM_FETCH]?: typeof fetch })[PLATFORM_FETCH];
  if (kept) return kept(input, init);
  const current = globalThis.fetch as Wrapped;
  return (current._nextOriginalFetch ?? current)(input, init);
};
