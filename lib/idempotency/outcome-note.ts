/**
 * Why an outcome is unknown, as operators and as callers read it. What may name a tool's or a
 * server's internals is for operators (key page, audit log); a caller (API token, MCP client) reads
 * a generic note:
 * - an in-process tool's exception message: the caller is told only that it threw;
 * - a tool's `OutcomeUnknown` detail (another server's error text, such as a guarded MCP server's
 *   protocol error): the caller reads the note without it.
 * Other notes ("timed out after 400 ms", "the service answered 502") are the same for both.
 */
const THREW = "the tool threw: ";

export const PUBLIC_THREW_NOTE = "the tool threw an exception after it started";

/** Where an operator's detail starts in a stored note; callers read what comes before it. */
const DETAIL = " (detail for operators: ";

/** The longest detail kept: a server's error page is not the record's business beyond its start. */
export const MAX_DETAIL_LENGTH = 500;

/** The operator's note for an exception thrown by an in-process tool. */
export function exceptionNote(message: string): string {
  return THREW + message;
}

/** The operator's note for a public note with a detail only operators read. */
export function noteWithDetail(note: string, detail: string | undefined): string {
  const kept = detail?.trim().slice(0, MAX_DETAIL_LENGTH);
  return kept ? `${note}${DETAIL}${kept})` : note;
}

/** A note as a caller may read it. */
export function publicOutcomeNote(note: string): string;
export function publicOutcomeNote(note: string | null): string | null;
export function publicOutcomeNote(note: string | null): string | null {
  if (note === null) return null;
  if (note.startsWith(THREW)) return PUBLIC_THREW_NOTE;
  const detail = note.indexOf(DETAIL);
  return detail >= 0 ? note.slice(0, detail) : note;
}
