import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setForwardedProto, trustedProxyCount } from "@/scripts/forwarded-proto.mjs";
import { servedOverHttps } from "./served-over-https";

const h = (proto?: string) => new Headers(proto === undefined ? {} : { "x-forwarded-proto": proto });

describe("servedOverHttps", () => {
  it("without a trusted proxy: the scheme of the server's own connection", () => {
    expect(servedOverHttps(h("https"), 0)).toBe(true);
    expect(servedOverHttps(h("http"), 0)).toBe(false);
    expect(servedOverHttps(h(), 0)).toBe(false);
    // never a list: only a proxy would have written one
    expect(servedOverHttps(h("http, https"), 0)).toBe(false);
  });

  it("behind trusted proxies: what the outermost one wrote", () => {
    expect(servedOverHttps(h("https"), 1)).toBe(true);
    expect(servedOverHttps(h("HTTPS "), 1)).toBe(true);
    expect(servedOverHttps(h("http"), 1)).toBe(false);
    expect(servedOverHttps(h(), 1)).toBe(false);
    // the client wrote "http", the proxy appended the scheme it was reached by
    expect(servedOverHttps(h("http, https"), 1)).toBe(true);
    // … or the client claimed https over a plain-HTTP proxy
    expect(servedOverHttps(h("https, http"), 1)).toBe(false);
    // two appending proxies: the outer one terminated TLS, the inner one was reached over http
    expect(servedOverHttps(h("https, http"), 2)).toBe(true);
    // two proxies where the inner one passes the outer one's header on
    expect(servedOverHttps(h("https"), 2)).toBe(true);
  });
});

describe("scripts/serve.mjs's X-Forwarded-Proto", () => {
  // servers that do what serve.mjs does, then answer with the header the app would see
  const echo = (trustedProxies: number) => (req: http.IncomingMessage, res: http.ServerResponse) => {
    setForwardedProto(req, trustedProxies);
    res.end(String(req.headers["x-forwarded-proto"] ?? ""));
  };
  const servers: { plain: http.Server; proxied: http.Server; tls: https.Server; plainUrl: string; proxiedUrl: string; tlsPort: number } = {} as never;
  let certDir: string;

  beforeAll(async () => {
    const listen = async (server: http.Server) => {
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      return (server.address() as AddressInfo).port;
    };
    servers.plain = http.createServer(echo(0));
    servers.proxied = http.createServer(echo(1));
    servers.plainUrl = `http://127.0.0.1:${await listen(servers.plain)}/`;
    servers.proxiedUrl = `http://127.0.0.1:${await listen(servers.proxied)}/`;
    // a self-signed certificate for a server reached over HTTPS directly
    certDir = mkdtempSync(path.join(os.tmpdir(), "idemgate-tls-"));
    const key = path.join(certDir, "key.pem");
    const cert = path.join(certDir, "cert.pem");
    execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", cert], { stdio: "ignore" });
    servers.tls = https.createServer({ key: readFileSync(key), cert: readFileSync(cert) }, echo(0));
    servers.tlsPort = await listen(servers.tls);
  });
  afterAll(() => {
    servers.plain?.close();
    servers.proxied?.close();
    servers.tls?.close();
    if (certDir) rmSync(certDir, { recursive: true, force: true });
  });

  const seen = async (url: string, proto?: string) => (await fetch(url, { headers: proto ? { "x-forwarded-proto": proto } : {} })).text();
  const seenOverTls = (proto?: string) =>
    new Promise<string>((resolve, reject) => {
      const req = https.request(
        { host: "127.0.0.1", port: servers.tlsPort, path: "/", rejectUnauthorized: false, headers: proto ? { "x-forwarded-proto": proto } : {} },
        (res) => {
          let body = "";
          res.on("data", (d) => (body += d));
          res.on("end", () => resolve(body));
        },
      );
      req.on("error", reject);
      req.end();
    });

  it("reached over HTTPS directly: https, whatever the client claims", async () => {
    expect(await seenOverTls()).toBe("https");
    expect(await seenOverTls("http")).toBe("https");
    expect(servedOverHttps(h(await seenOverTls()), 0)).toBe(true);
  });

  it("without a trusted proxy, a client's https claim over plain HTTP becomes http", async () => {
    expect(await seen(servers.plainUrl, "https")).toBe("http");
    expect(await seen(servers.plainUrl)).toBe("http");
    expect(servedOverHttps(h(await seen(servers.plainUrl, "https")), 0)).toBe(false);
  });

  it("with a trusted proxy, the proxy's header is kept", async () => {
    expect(await seen(servers.proxiedUrl, "https")).toBe("https");
    expect(await seen(servers.proxiedUrl)).toBe("");
  });

  it("IDEMGATE_TRUSTED_PROXY read as serve.mjs reads it", () => {
    expect(trustedProxyCount({})).toBe(0);
    expect(trustedProxyCount({ IDEMGATE_TRUSTED_PROXY: " 1 " })).toBe(1);
    expect(trustedProxyCount({ IDEMGATE_TRUSTED_PROXY: "0" })).toBe(0);
    expect(trustedProxyCount({ IDEMGATE_TRUSTED_PROXY: "" })).toBe(0);
  });
});
