import { describe, expect, it } from "vitest";
import { metadataParam, pageParam } from "./page-param";

describe("pageParam", () => {
  it("decodes a page's segment once, as Next.js encoded it", () => {
    for (const key of ["order%41-1", "100%", "a/b/../c", "p+q", "h#1", "q?x=1&y", "sp ace", "caf%C3%A9", "%2F%2e%2e%25", "é"]) {
      expect(pageParam(encodeURIComponent(key))).toBe(key);
    }
  });

  it("names nothing for a segment that is not valid percent-encoding", () => {
    expect(pageParam("%")).toBeNull();
    expect(pageParam("%E0%A4%A")).toBeNull();
  });

  it("leaves a title's segment as Next.js hands it to generateMetadata, decoded once already", () => {
    // the address /keys/demo/order%2541-1 names the key order%41-1, whose title is not orderA-1
    for (const key of ["order%41-1", "100%", "caf%C3%A9", "%2F%2e%2e%25"]) expect(metadataParam(key)).toBe(key);
  });
});
