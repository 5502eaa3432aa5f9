import { describe, expect, it } from "vitest";
import { clientAddress } from "./client-address";

const h = (xff?: string) => new Headers(xff === undefined ? {} : { "x-forwarded-for": xff });

describe("clientAddress", () => {
  it("is unknown (null) without a trusted proxy, whatever the client claims", () => {
    expect(clientAddress(h("203.0.113.7"), 0)).toBeNull();
    expect(clientAddress(h(), 0)).toBeNull();
  });

  it("takes the entry the trusted proxies appended, never one the client wrote", () => {
    // the client sent "X-Forwarded-For: 1.2.3.4"; the one proxy appended the address it saw
    expect(clientAddress(h("1.2.3.4, 203.0.113.7"), 1)).toBe("203.0.113.7");
    expect(clientAddress(h("203.0.113.7"), 1)).toBe("203.0.113.7");
    // two proxies: the outer one saw the client, the inner one saw the outer proxy
    expect(clientAddress(h("1.2.3.4, 203.0.113.7, 10.0.0.2"), 2)).toBe("203.0.113.7");
    expect(clientAddress(h(" 2001:DB8::1 "), 1)).toBe("2001:db8::1");
  });

  it("counts a request that did not pass the proxies under one address", () => {
    expect(clientAddress(h(), 1)).toBe("unknown");
    expect(clientAddress(h("203.0.113.7"), 2)).toBe("unknown");
  });
});
