import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { outboundFetch, PLATFORM_FETCH } from "./outbound-fetch";

// Requests to guarded services go out on the platform's fetch, not on the wrapper Next.js installs
// over globalThis.fetch for rendering pages (which it keeps as _nextOriginalFetch).
describe("outboundFetch", () => {
  let server: http.Server;
  let url: string;
  beforeAll(async () => {
    server = http.createServer((req, res) => res.end(JSON.stringify({ method: req.method, path: req.url })));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  afterEach(() => {
    vi.unstubAllGlobals();
    delete (globalThis as { [PLATFORM_FETCH]?: unknown })[PLATFORM_FETCH];
  });

  it("calls the platform's fetch the server kept before Next.js loaded, whatever wraps globalThis.fetch", async () => {
    (globalThis as { [PLATFORM_FETCH]?: typeof fetch })[PLATFORM_FETCH] = globalThis.fetch;
    const wrapper = vi.fn(() => Promise.reject(new Error("a page-rendering wrapper was called")));
    vi.stubGlobal("fetch", wrapper);
    expect(await (await outboundFetch(`${url}/kept`, { method: "POST", body: "{}" })).json()).toEqual({ method: "POST", path: "/kept" });
    expect(wrapper).not.toHaveBeenCalled();
  });

  it("calls the fetch a wrapper replaced, never the wrapper", async () => {
    const platform = globalThis.fetch;
    const wrapper = Object.assign(vi.fn(() => Promise.reject(new Error("the page-rendering wrapper was called"))), { _nextOriginalFetch: platform });
    vi.stubGlobal("fetch", wrapper);
    const answer = await outboundFetch(`${url}/tool`, { method: "POST", body: "{}" });
    expect(await answer.json()).toEqual({ method: "POST", path: "/tool" });
    expect(wrapper).not.toHaveBeenCalled();
  });

  it("calls globalThis.fetch as it is at the call when nothing wraps it", async () => {
    const stub = vi.fn(async () => new Response("stubbed"));
    vi.stubGlobal("fetch", stub);
    expect(await (await outboundFetch(`${url}/x`)).text()).toBe("stubbed");
    expect(stub).toHaveBeenCalledWith(`${url}/x`, undefined);
  });
});
