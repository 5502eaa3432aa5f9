/**
 * Why an outcome is unknown, as operators and as callers read it. An in-process tool's exception
 * message is for operators (key page, audit log); a caller (API token) is told only that it threw.
 * Other notes ("timed out after 400 ms", "the service answered 502") are the same for both.
 */
const THREW = "the tool threw: ";

export const PUBLIC_THREW_NOTE = "the tool threw an exception after it started";

/** The operator's note for an exception thrown by an in-process tool. */
export function exceptionNote(message: string): string {
  return THREW + message;
}

/** A note as a caller may read it. */
export function publicOutcomeNote(note: string): string;
export function publicOutcomeNote(note: string | null): string | null;
export function publicOutcomeNote(note: string | null): string | null {
  return note !== null && note.startsWith(THREW) ? PUBLIC_THREW_NOTE : note;
}
