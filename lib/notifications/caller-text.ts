/**
 * Text a caller chose (a key, a scope, the note a reservation was released with) on its way into an
 * operator's notification. Callers are tenants: nothing they write may format, link, mention or
 * stretch a message their operators read.
 */

/** How many characters of each caller-chosen field a notification carries at most. */
export const CALLER_TEXT_LIMITS = { key: 120, scope: 80, summary: 600 } as const;

// C0/C1 controls, line and paragraph separators, and the bidirectional overrides and isolates that
// could reorder what an operator reads
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f]+/g;

/** One line of at most `max` characters (an ellipsis says it was cut), no control characters. */
export function plainCallerText(text: string, max: number): string {
  const line = text.replace(UNPRINTABLE, " ").replace(/ {2,}/g, " ").trim();
  const chars = Array.from(line);
  return chars.length <= max ? line : `${chars.slice(0, max - 1).join("")}…`;
}

/** Slack reads these three as markup: the only escapes its mrkdwn has. */
export function slackEscape(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** Idemgate's own text (a declared tool's name, an anomaly's id) as a Slack mrkdwn code span. */
export function slackCode(text: string): string {
  return `\`${slackEscape(text.replace(/`/g, "\u02cb"))}\``;
}

/**
 * Caller-chosen text as a Slack mrkdwn code span, inert: mrkdwn has no escape for its formatting
 * characters, so inside the span (where `*`, `_` and `~` do not format) a backtick, which would end
 * it, becomes a look-alike (ˋ); `&`, `<` and `>` are entities (no `<url|label>` link, no `<!here>`);
 * `@` is followed by a word joiner (no @channel, @here, @everyone) and `.`, `:` and `/` by one too (no
 * URL or domain Slack would link). One line, capped at `max` characters.
 */
export function slackCallerCode(text: string, max: number): string {
  const line = plainCallerText(text, max);
  const inert = slackEscape(line.replace(/`/g, "\u02cb")).replace(/([@.:/])/g, "$1\u2060");
  return `\`${inert || " "}\``;
}
