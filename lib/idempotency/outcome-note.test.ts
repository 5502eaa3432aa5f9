import { describe, expect, it } from "vitest";
import { exceptionNote, MAX_DETAIL_LENGTH, noteWithDetail, PUBLIC_THREW_NOTE, publicOutcomeNote } from "./outcome-note";

describe("outcome notes", () => {
  it("keeps an exception's message and a tool's detail for operators; callers read a generic note", () => {
    expect(publicOutcomeNote(exceptionNote("connect ECONNREFUSED db.internal:5432"))).toBe(PUBLIC_THREW_NOTE);
    const stored = noteWithDetail("the call to the MCP server files failed", "HTTP 500: stack trace at /srv/app/secret.js");
    expect(stored).toContain("/srv/app/secret.js");
    expect(publicOutcomeNote(stored)).toBe("the call to the MCP server files failed");
  });

  it("leaves other notes as they are, and bounds a detail", () => {
    expect(publicOutcomeNote("timed out after 400 ms")).toBe("timed out after 400 ms");
    expect(publicOutcomeNote(null)).toBeNull();
    expect(noteWithDetail("no answer", undefined)).toBe("no answer");
    expect(noteWithDetail("no answer", "  ")).toBe("no answer");
    const long = noteWithDetail("failed", "x".repeat(MAX_DETAIL_LENGTH * 3));
    expect(long.length).toBeLessThan(MAX_DETAIL_LENGTH + 60);
  });
});
