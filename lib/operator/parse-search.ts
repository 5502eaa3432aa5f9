import { KEY_STATES, type KeyState } from "@/lib/idempotency/record";
import { badRequest } from "@/lib/http/problem";

/**
 * What the console's one search box was asked (docs/operate.md § Find anything):
 * - `tool:… state:… scope:…` (any of them, in any order, with at most one bare word as a key prefix):
 *   the keys list with those filters;
 * - `session:ID`: that run's page (sessionSearch);
 * - one term: a key or key prefix, an execution id, and an argument value of a kept call. A term
 *   `name:value` (`customerId:cus_42`, `customer.id:cus_42` for a nested field) looks for that
 *   argument only; a bare value is looked for under any top-level argument name.
 */
export type SearchQuery =
  | { kind: "filter"; state?: KeyState; tool?: string; scope?: string; prefix?: string }
  | { kind: "term"; term: string; argument: { path: string[]; value: string } | null };

const FILTERS = ["tool", "state", "scope"] as const;
const MAX_TERM = 255;
const NAMED = /^([A-Za-z_$][\w$-]*(?:\.[A-Za-z_$][\w$-]*)*):(.+)$/;

const invalid = (detail: string) => badRequest("invalid_request", detail);

/** `session:ID` (one word): the run to open, else null. */
export function sessionSearch(raw: string | null | undefined): string | null {
  const match = /^session:(\S+)$/i.exec((raw ?? "").trim());
  return match && /^[\x21-\x7e]{1,200}$/.test(match[1]) ? match[1] : null;
}

export function parseSearch(raw: string | null | undefined): SearchQuery {
  const q = (raw ?? "").trim();
  if (!q) throw invalid("type something to search for: a key, a key prefix, an execution id, an argument value, or tool:… state:… scope:…");
  if (q.length > MAX_TERM) throw invalid(`a search is at most ${MAX_TERM} characters`);
  const words = q.split(/\s+/);
  const isFilter = (w: string) => FILTERS.some((f) => w.toLowerCase().startsWith(`${f}:`));
  if (!words.some(isFilter)) {
    if (words.length > 1) throw invalid("search for one thing at a time (keys and ids have no spaces), or filter with tool:… state:… scope:…");
    const named = NAMED.exec(q);
    return { kind: "term", term: q, argument: named ? { path: named[1].split("."), value: named[2] } : null };
  }
  const out: Extract<SearchQuery, { kind: "filter" }> = { kind: "filter" };
  for (const w of words) {
    if (!isFilter(w)) {
      if (out.prefix !== undefined) throw invalid(`only one key prefix may go with the filters; "${out.prefix}" and "${w}" are two`);
      out.prefix = w;
      continue;
    }
    const at = w.indexOf(":");
    const name = w.slice(0, at).toLowerCase() as (typeof FILTERS)[number];
    const value = w.slice(at + 1);
    if (!value) throw invalid(`${name}: needs a value, e.g. ${name === "state" ? "state:unknown" : name === "tool" ? "tool:payments.charge" : "scope:acme"}`);
    if (out[name] !== undefined) throw invalid(`${name}: is given twice`);
    if (name === "state") {
      if (!(KEY_STATES as readonly string[]).includes(value)) throw invalid(`state:${value} is not a key state; one of ${KEY_STATES.join(", ")}`);
      out.state = value as KeyState;
    } else out[name] = value;
  }
  return out;
}

/**
 * The JSON documents a term must be contained in (`@>`) to match: `name:value`, the kept arguments
 * hold the value under that path; a bare value, the array of their top-level values holds it
 * (`["cus_42"]`, whatever name it was given). A value that reads as a JSON number or boolean is also
 * looked for as one (`amountCents:1999` finds 1999 and "1999").
 */
export function argumentCandidates(query: Extract<SearchQuery, { kind: "term" }>): string[] {
  const values = (v: string): unknown[] => {
    const out: unknown[] = [v];
    if (v === "true" || v === "false") out.push(v === "true");
    else if (/^-?\d+(\.\d+)?$/.test(v) && Number.isFinite(Number(v))) out.push(Number(v));
    return out;
  };
  const nest = (path: readonly string[], value: unknown): unknown => path.reduceRight<unknown>((inner, name) => ({ [name]: inner }), value);
  const docs = query.argument
    ? values(query.argument.value).map((v) => nest(query.argument!.path, v))
    : values(query.term).map((v) => [v]);
  return docs.map((d) => JSON.stringify(d));
}
