import { describe, expect, it } from "vitest";
import { safeNextPath } from "./safe-next-path";

describe("safeNextPath", () => {
  it("keeps a path on this site, with its query", () => {
    expect(safeNextPath("/keys?state=stuck&tool=payments.charge")).toBe("/keys?state=stuck&tool=payments.charge");
    expect(safeNextPath("/keys/demo/order%2F1")).toBe("/keys/demo/order%2F1");
  });

  it.each([undefined, "", "keys", "//evil.example/x", "/\\evil.example", "https://evil.example/", "javascript:alert(1)", "/login", "/x\n/y", 42])(
    "falls back to the overview for %j",
    (next) => {
      expect(safeNextPath(next)).toBe("/");
    },
  );
});
