import { describe, expect, it } from "vitest";
import { safeNextPath } from "./safe-next-path";

/** Where a browser goes when it follows `Location: <path>` from a page of this site. */
const followed = (path: string) => new URL(path, "https://console.example:8443/login");

describe("safeNextPath", () => {
  it("keeps a path on this site, with its query", () => {
    expect(safeNextPath("/keys?state=stuck&tool=payments.charge")).toBe("/keys?state=stuck&tool=payments.charge");
    expect(safeNextPath("/keys/demo/order%2F1")).toBe("/keys/demo/order%2F1");
    expect(safeNextPath("/keys/demo/order%41-1#timeline-heading")).toBe("/keys/demo/order%41-1#timeline-heading");
  });

  it("removes dot-segments as a browser would, and keeps what stays on this site", () => {
    expect(safeNextPath("/keys/./x")).toBe("/keys/x");
    expect(safeNextPath("/keys/../tools")).toBe("/tools");
    expect(safeNextPath("/%2e%2e/tools")).toBe("/tools");
    // an encoded slash is a character of a segment, not a separator
    expect(safeNextPath("/%2F%2Fevil.example")).toBe("/%2F%2Fevil.example");
    expect(safeNextPath("/ /evil.example")).toBe("/%20/evil.example");
  });

  const hostile = [
    undefined,
    42,
    "",
    "keys",
    "/login",
    "/./login?next=/keys",
    "//evil.example/x",
    "///evil.example",
    "/\\evil.example",
    "\\/evil.example",
    "/\\/evil.example",
    "https://evil.example/",
    "http:evil.example",
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    "/x\n/y",
    "/\t/evil.example",
    "/\n/evil.example",
    "/\r/evil.example",
    // dot-segments that leave an empty first segment behind: a protocol-relative reference
    "/.//evil.example",
    "/./\\evil.example",
    "/../\\evil.example",
    "/a/..//evil.example",
    "/../..//evil.example",
    "/%2e//evil.example",
    "/%2E//evil.example",
    "/%2e%2e//evil.example",
    "/.%2e//evil.example",
    "/a/%2e%2e//evil.example",
    "/./%2e/..//evil.example",
    "/.//evil.example/keys?x=1#y",
    "/.///evil.example",
    "/.//user:pass@evil.example",
    "/.//evil.example:443",
  ];

  it.each(hostile)("falls back to the overview for %j", (next) => {
    expect(safeNextPath(next)).toBe("/");
  });

  it("answers only paths a browser resolves to this site", () => {
    const candidates = [...hostile, "/.//evil.example", "/x/..//evil.example", "/%2e%2e/%2e%2e//evil.example", "/keys/./x", "/%2F%2Fevil.example"];
    for (const next of candidates) {
      const path = safeNextPath(next);
      expect(followed(path).origin, JSON.stringify(next)).toBe("https://console.example:8443");
      expect(path.startsWith("/") && !path.startsWith("//")).toBe(true);
    }
  });
});
