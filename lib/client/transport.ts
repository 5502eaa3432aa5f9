// How the client's requests reach the gateway. In Node, node:http(s) on keep-alive connections of
// the client's own: fetch (undici) costs about 0.3 ms more per request on loopback (docs/benchmarks.md),
// and guard() sends two requests per first execution. Elsewhere (browsers), fetch.
import type { Transport } from "./wire";

export type { Transport, WireRequest, WireResponse } from "./wire";

export function fetchTransport(fetchImpl: typeof fetch): Transport {
  return (url, request) => fetchImpl(url, request);
}

function runsInNode(): boolean {
  const versions = (globalThis as { process?: { versions?: { node?: unknown } } }).process?.versions;
  return typeof versions?.node === "string";
}

/**
 * The transport a client without a `fetch` of its own uses: node:http(s) where Node's modules are
 * there, else the global fetch. Loaded on the first request, so nothing of Node is imported elsewhere
 * (and package.json's `browser` field tells bundlers to leave node-transport out of browser builds).
 */
export async function defaultTransport(): Promise<Transport> {
  if (runsInNode()) {
    try {
      const { nodeTransport } = await import("./node-transport");
      return nodeTransport();
    } catch {
      // a runtime that says it is Node without node:http: fetch below
    }
  }
  return fetchTransport(globalThis.fetch.bind(globalThis));
}
