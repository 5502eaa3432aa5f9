import { describe, expect, it } from "vitest";
import { reasonPlaceholder, RESULT_PLACEHOLDER } from "./decision-placeholders";

describe("decision placeholders", () => {
  it("describe the decision being taken, not the opposite one", () => {
    expect(reasonPlaceholder("resolve")).toMatch(/action happened/);
    expect(reasonPlaceholder("resolve")).not.toMatch(/not|no /);
    expect(reasonPlaceholder("release")).toMatch(/did not happen/);
  });

  it("name no particular kind of tool", () => {
    for (const text of [reasonPlaceholder("resolve"), reasonPlaceholder("release"), RESULT_PLACEHOLDER]) expect(text).not.toMatch(/charge|PSP|amount/i);
  });
});
