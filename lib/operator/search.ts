import { findExecutionById, findExecutionsByArguments, type FoundExecution } from "@/lib/audit/find-executions";
import type { Runtime } from "@/lib/server/runtime";
import { listKeys } from "./list-keys";
import { argumentCandidates, parseSearch, type SearchQuery } from "./parse-search";
import type { Audience, KeyView } from "./present-key";

export interface SearchAnswer {
  query: string;
  /** `tool:… state:… scope:…`: the filters, as the keys list takes them */
  filter: { state?: string; tool?: string; scope?: string; prefix?: string } | null;
  /** keys whose name is the term or starts with it (the exact one first), or that match the filter */
  keys: KeyView[];
  /** more keys match than are listed: the keys list with the same filter has them all */
  moreKeys: boolean;
  /** the execution with the term as its id, then executions whose kept arguments hold the value */
  executions: FoundExecution[];
  /** the argument `name:value` named (empty for a bare value, which is looked for under any top-level name) */
  argumentNames: string[];
  /** how many calls hold the value (counted up to 10,000); the newest 50 of them are among `executions` */
  argumentMatches: number;
  /** how many of those are not listed (name the argument to narrow the search) */
  moreExecutions: number;
  /** so many calls hold the value that only the newest of the first 10,000 found are listed */
  argumentMatchesCapped: boolean;
}

/** a filter's answer lists keys only: no executions, nothing found by an argument */
function noExecutions(): Pick<SearchAnswer, "executions" | "argumentNames" | "argumentMatches" | "moreExecutions" | "argumentMatchesCapped"> {
  return { executions: [], argumentNames: [], argumentMatches: 0, moreExecutions: 0, argumentMatchesCapped: false };
}

const KEYS_SHOWN = 20;
const EXECUTIONS_SHOWN = 50;

/**
 * One search box's answer (lib/operator/parse-search.ts says what it takes). `scope` is set for a
 * tenant's API token: every part of the answer stays in it.
 */
export async function search(
  runtime: Pick<Runtime, "config" | "store" | "db">,
  raw: string | null | undefined,
  options: { scope?: string; audience?: Audience } = {},
): Promise<SearchAnswer> {
  const query = parseSearch(raw);
  const audience = options.audience ?? "operator";
  if (query.kind === "filter") return searchFilter(runtime, query, options.scope, audience, raw!.trim());
  const { term } = query;
  const [keys, byId, byArguments] = await Promise.all([
    listKeys(runtime, { prefix: term, scope: options.scope, limit: KEYS_SHOWN }, audience),
    findExecutionById(runtime.db, term, options.scope),
    argumentSearch(runtime, query, options.scope),
  ]);
  const exactFirst = [...keys.items].sort((a, b) => Number(b.key === term) - Number(a.key === term));
  const executions = [...(byId ? [byId] : []), ...byArguments.found.filter((e) => e.id !== byId?.id)];
  return {
    query: term, filter: null, keys: exactFirst, moreKeys: keys.nextCursor !== null, executions,
    argumentNames: byArguments.names,
    argumentMatches: byArguments.matches,
    // of the calls found by the value, the one found by its id too is listed (first)
    moreExecutions: Math.max(0, byArguments.matches - byArguments.found.length),
    argumentMatchesCapped: byArguments.capped,
  };
}

async function argumentSearch(runtime: Pick<Runtime, "db">, query: Extract<SearchQuery, { kind: "term" }>, scope: string | undefined) {
  // a bare value is looked for among every kept call's top-level values, under any name: a list of
  // names to try it under would be chosen by the calls, and one tenant's calls could crowd out another's
  const within = query.argument ? "arguments" : "top-level values";
  const { found, matches, capped } = await findExecutionsByArguments(runtime.db, argumentCandidates(query), scope, EXECUTIONS_SHOWN, within);
  return { names: query.argument ? [query.argument.path.join(".")] : [], found, matches, capped };
}

async function searchFilter(
  runtime: Pick<Runtime, "config" | "store" | "db">,
  query: Extract<SearchQuery, { kind: "filter" }>,
  tenantScope: string | undefined,
  audience: Audience,
  raw: string,
): Promise<SearchAnswer> {
  const { kind: _kind, ...filter } = query;
  if (tenantScope !== undefined && filter.scope !== undefined && filter.scope !== tenantScope) {
    // a tenant's token sees its own scope only: another scope simply has nothing for it
    return { query: raw, filter, keys: [], moreKeys: false, ...noExecutions() };
  }
  const page = await listKeys(runtime, { ...filter, scope: tenantScope ?? filter.scope, limit: KEYS_SHOWN }, audience);
  return { query: raw, filter, keys: page.items, moreKeys: page.nextCursor !== null, ...noExecutions() };
}
