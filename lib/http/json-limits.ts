/**
 * What JSON.parse cannot be trusted with, found in the text before it is parsed:
 * - nesting deeper than a limit: JSON.parse copes, but everything after it that walks the value
 *   recursively (the fingerprint's canonicalizer, JSON.stringify of the body forwarded upstream)
 *   overflows the stack, and parsing 100,000 levels alone costs a tenth of a second;
 * - integers beyond ±(2^53 − 1) (Number.MAX_SAFE_INTEGER): JSON.parse rounds them to the nearest
 *   double without a word (9007199254740993 becomes 9007199254740992), so the fingerprint and the
 *   body forwarded to a service would carry another number than the caller sent. They are reported
 *   with their path so the caller can send them as strings. Numbers written with a fraction or an
 *   exponent (1.5, 1e21) are floating point by the sender's choice and are left alone.
 *
 * One pass over the text, no recursion; it stops at the first level beyond the limit. Meant to run
 * before JSON.parse: on text that is not JSON it still ends, and JSON.parse then has the last word.
 */
export interface JsonScan {
  /** nesting passed the limit (the scan stopped there) */
  tooDeep: boolean;
  /** integer literals JSON.parse would round, with their paths (`items[2].id`, `(body)` for the root) */
  unsafeIntegers: { path: string; literal: string }[];
}

interface Frame {
  array: boolean;
  /** the current element's index (arrays) */
  index: number;
  /** the current member's name as it is written, quotes included (objects) */
  rawKey: string;
  /** the next string in this object is a member name */
  expectKey: boolean;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const MINUS = 0x2d;

/** MAX_SAFE_INTEGER has 16 digits: a shorter integer literal is always exact. */
const SAFE_DIGITS = 15;

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/** digits, sign, decimal point, exponent */
function isNumberChar(c: number): boolean {
  return isDigit(c) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === MINUS;
}

/** The index after the string that opens at `start` (its closing quote is the first not escaped). */
function stringEnd(text: string, start: number): number {
  let from = start + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote < 0) return text.length;
    let backslashes = 0;
    for (let b = quote - 1; b > start && text.charCodeAt(b) === BACKSLASH; b--) backslashes++;
    if (backslashes % 2 === 0) return quote + 1;
    from = quote + 1;
  }
}

function memberName(rawKey: string): string {
  try {
    return JSON.parse(rawKey) as string;
  } catch {
    return rawKey;
  }
}

function pathOf(frames: Frame[], root: string): string {
  if (frames.length === 0) return root;
  let path = "";
  for (const frame of frames) {
    if (frame.array) path += `[${frame.index}]`;
    else path += (path === "" ? "" : ".") + memberName(frame.rawKey);
  }
  return path;
}

export function scanJson(text: string, options: { maxDepth: number; maxReported?: number; root?: string }): JsonScan {
  const { maxDepth, maxReported = 10, root = "(body)" } = options;
  const frames: Frame[] = [];
  const unsafeIntegers: JsonScan["unsafeIntegers"] = [];
  const length = text.length;
  let i = 0;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = stringEnd(text, i);
      const top = frames.at(-1);
      if (top && !top.array && top.expectKey) {
        top.rawKey = text.slice(i, end);
        top.expectKey = false;
      }
      i = end;
      continue;
    }
    if (c === MINUS || isDigit(c)) {
      let end = i + 1;
      while (end < length && isNumberChar(text.charCodeAt(end))) end++;
      const digits = end - i - (c === MINUS ? 1 : 0);
      if (digits > SAFE_DIGITS && unsafeIntegers.length < maxReported) {
        const literal = text.slice(i, end);
        if (/^-?\d+$/.test(literal) && !Number.isSafeInteger(Number(literal))) unsafeIntegers.push({ path: pathOf(frames, root), literal });
      }
      i = end;
      continue;
    }
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (frames.length >= maxDepth) return { tooDeep: true, unsafeIntegers };
      frames.push({ array: c === OPEN_ARRAY, index: 0, rawKey: "", expectKey: c === OPEN_OBJECT });
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      frames.pop();
    } else if (c === COMMA) {
      const top = frames.at(-1);
      if (top?.array) top.index++;
      else if (top) top.expectKey = true;
    }
    i++;
  }
  return { tooDeep: false, unsafeIntegers };
}
