import { describe, expect, it } from "vitest";
import { executionsNote } from "./format";

const none = { succeeded: 0, failed: 0, final_error: 0, late_completion: 0, released: 0, unknown: 0 };

describe("executionsNote", () => {
  it("does not call executions whose outcome is unknown side effects that ran", () => {
    expect(executionsNote(2, { ...none, unknown: 2 })).toBe("2 calls ended unknown");
    expect(executionsNote(1, { ...none, unknown: 1 })).toBe("1 call ended unknown");
  });

  it("says what is known of each", () => {
    expect(executionsNote(3, { ...none, succeeded: 2, final_error: 1 })).toBe("3 calls ran");
    expect(executionsNote(4, { ...none, succeeded: 1, failed: 1, unknown: 2 })).toBe("1 ran · 1 not run (the tool said so) · 2 ended unknown");
    expect(executionsNote(0, none)).toBe("no calls ran");
  });
});
