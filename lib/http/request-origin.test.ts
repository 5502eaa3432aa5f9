import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setForwardedProto } from "@/scripts/forwarded-proto.mjs";
import { originMatches, requestOrigin } from "./request-origin";

const h = (headers: Record<string, string>) => new Headers(headers);

/** Whether a cookie-authenticated mutation with these headers passes the same-origin check. */
const sameOrigin = (headers: Record<string, string>, trustedProxies = 0) => originMatches(headers.origin ?? null, requestOrigin(h(headers), trustedProxies));

describe("requestOrigin", () => {
  it("without a trusted proxy: Host and the scheme of the server's own connection; forwarded hosts are ignored", () => {
    expect(requestOrigin(h({ host: "127.0.0.1:3000", "x-forwarded-proto": "http" }), 0)).toBe("http://127.0.0.1:3000");
    expect(requestOrigin(h({ host: "Console.Example", "x-forwarded-proto": "https" }), 0)).toBe("https://console.example");
    expect(requestOrigin(h({ host: "console.example:443", "x-forwarded-proto": "https" }), 0)).toBe("https://console.example");
    expect(requestOrigin(h({ host: "127.0.0.1:3000", "x-forwarded-host": "evil.example", "x-forwarded-proto": "http" }), 0)).toBe("http://127.0.0.1:3000");
    expect(requestOrigin(h({ "x-forwarded-host": "evil.example" }), 0)).toBeNull();
  });

  it("behind trusted proxies: the host and scheme the outermost one reports, else Host", () => {
    const proxied = { host: "10.0.0.5:3000", "x-forwarded-host": "console.example", "x-forwarded-proto": "https" };
    expect(requestOrigin(h(proxied), 1)).toBe("https://console.example");
    expect(requestOrigin(h({ ...proxied, "x-forwarded-host": "console.example:8443" }), 1)).toBe("https://console.example:8443");
    // the client wrote the first entry, the one proxy appended what it was asked for
    expect(requestOrigin(h({ ...proxied, "x-forwarded-host": "evil.example, console.example" }), 1)).toBe("https://console.example");
    expect(requestOrigin(h({ ...proxied, "x-forwarded-host": "evil.example, console.example, lb.internal" }), 2)).toBe("https://console.example");
    expect(requestOrigin(h({ host: "10.0.0.5:3000", "x-forwarded-proto": "http" }), 1)).toBe("http://10.0.0.5:3000");
  });

  it("a host value beyond host[:port] names no origin", () => {
    for (const host of ["evil.example/x", "user@console.example", "console.example?x", "console.example#x", "", "a b"]) {
      expect(requestOrigin(h({ host, "x-forwarded-proto": "http" }), 0), host).toBeNull();
    }
  });
});

describe("the same-origin check", () => {
  const direct = { host: "127.0.0.1:3000", "x-forwarded-proto": "http" };

  it("accepts this server's own origin, whatever forwarded host a client claims without a trusted proxy", () => {
    expect(sameOrigin({ ...direct, origin: "http://127.0.0.1:3000" })).toBe(true);
    expect(sameOrigin({ ...direct, origin: "http://127.0.0.1:3000", "x-forwarded-host": "evil.example" })).toBe(true);
  });

  it("refuses a forged X-Forwarded-Host with a matching Origin when no proxy is trusted", () => {
    expect(sameOrigin({ ...direct, origin: "http://evil.example", "x-forwarded-host": "evil.example" })).toBe(false);
  });

  it("compares scheme and port, not only the host", () => {
    expect(sameOrigin({ ...direct, origin: "https://127.0.0.1:3000" })).toBe(false);
    expect(sameOrigin({ ...direct, origin: "http://127.0.0.1:3001" })).toBe(false);
    expect(sameOrigin({ ...direct, origin: "http://127.0.0.1" })).toBe(false);
    expect(sameOrigin({ host: "console.example", "x-forwarded-proto": "https", origin: "http://console.example" })).toBe(false);
    expect(sameOrigin({ host: "console.example", "x-forwarded-proto": "https", origin: "https://console.example:443" })).toBe(true);
  });

  it("refuses a missing, opaque or malformed Origin", () => {
    expect(sameOrigin(direct)).toBe(false);
    expect(sameOrigin({ ...direct, origin: "null" })).toBe(false);
    expect(sameOrigin({ ...direct, origin: "127.0.0.1:3000" })).toBe(false);
    expect(sameOrigin({ ...direct, origin: "file:///etc/passwd" })).toBe(false);
  });

  it("behind a trusted proxy: the forwarded host and scheme", () => {
    const proxied = { host: "10.0.0.5:3000", "x-forwarded-host": "console.example", "x-forwarded-proto": "https" };
    expect(sameOrigin({ ...proxied, origin: "https://console.example" }, 1)).toBe(true);
    expect(sameOrigin({ ...proxied, origin: "http://console.example" }, 1)).toBe(false);
    expect(sameOrigin({ ...proxied, origin: "http://10.0.0.5:3000" }, 1)).toBe(false);
    expect(sameOrigin({ ...proxied, origin: "https://evil.example", "x-forwarded-host": "evil.example" }, 0)).toBe(false);
  });
});

describe("over HTTP, with the headers scripts/serve.mjs hands on", () => {
  // servers that do what serve.mjs does before Next.js sees a request, then answer with the origin the app derives
  const servers: http.Server[] = [];
  const urls: Record<"direct" | "proxied", string> = { direct: "", proxied: "" };
  beforeAll(async () => {
    for (const [name, trustedProxies] of [["direct", 0], ["proxied", 1]] as const) {
      const server = http.createServer((req, res) => {
        setForwardedProto(req, trustedProxies);
        const headers = new Headers();
        for (const [header, value] of Object.entries(req.headers)) if (typeof value === "string") headers.set(header, value);
        res.end(String(requestOrigin(headers, trustedProxies)));
      });
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      servers.push(server);
      urls[name] = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    }
  });
  afterAll(() => servers.forEach((server) => server.close()));

  const forged = { "x-forwarded-host": "evil.example", "x-forwarded-proto": "https" };
  const originAt = async (url: string, headers: Record<string, string> = {}) => (await fetch(url, { headers })).text();

  it("without a trusted proxy: the server's own origin, whatever the client forwarded", async () => {
    expect(await originAt(urls.direct, forged)).toBe(urls.direct);
    expect(await originAt(urls.direct)).toBe(urls.direct);
  });

  it("with IDEMGATE_TRUSTED_PROXY=1: the forwarded host and scheme", async () => {
    expect(await originAt(urls.proxied, forged)).toBe("https://evil.example");
    expect(await originAt(urls.proxied)).toBe(urls.proxied);
  });
});
