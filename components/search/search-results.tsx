import Link from "next/link";
import { CopyButton } from "@/components/docs/copy-button";
import { StateBadge } from "@/components/keys/state-badge";
import { keyHref } from "@/lib/console/api";
import type { SearchAnswer } from "@/lib/operator/search";

const when = (iso: string) => iso.replace("T", " ").slice(0, 19);

function keysListHref(filter: NonNullable<SearchAnswer["filter"]>): string {
  const params = new URLSearchParams(Object.entries(filter).filter((e): e is [string, string] => typeof e[1] === "string"));
  return `/keys?${params}`;
}

/** The answer of the header's search box: keys, then executions, each linking to its key's page. */
export function SearchResults({ q, answer, problem }: { q: string; answer?: SearchAnswer; problem?: string }) {
  const nothing = answer && answer.keys.length === 0 && answer.executions.length === 0;
  const more = answer?.moreExecutions ?? 0;
  return (
    <div className="space-y-6">
      <div>
        <h1 className="text-xl font-semibold tracking-tight">Search</h1>
        <p className="mt-1 text-muted">
          A key or key prefix, an execution id, an argument value (<code className="font-mono text-[12px]">cus_42</code> or{" "}
          <code className="font-mono text-[12px]">customerId:cus_42</code>), or <code className="font-mono text-[12px]">tool:… state:… scope:…</code>. Press{" "}
          <kbd className="rounded border border-line px-1 font-mono text-[11px]">/</kbd> anywhere to search.
        </p>
        {q.trim() !== "" && (
          <p data-testid="search-query" className="mt-3 text-[13px] text-muted">
            Searched for <span className="rounded bg-surface-2 px-1.5 py-0.5 font-mono text-[12.5px] break-all text-fg">{q}</span>
          </p>
        )}
      </div>
      {problem && (
        <div role="alert" data-testid="search-problem" className="rounded-lg border border-bad/30 bg-bad-soft px-4 py-3 text-[13px]">
          <p className="font-medium text-bad">Nothing searched</p>
          <p className="mt-1 text-fg/85">{problem}</p>
        </div>
      )}
      {nothing && (
        <p data-testid="search-nothing" className="rounded-xl border border-line bg-surface px-4 py-6 text-center text-muted">
          Nothing matches <span className="font-mono text-fg">{q}</span>
          {answer.argumentNames.length > 0 && <> (arguments looked in: {answer.argumentNames.join(", ")})</>}.
        </p>
      )}
      {answer && answer.keys.length > 0 && (
        <section aria-labelledby="found-keys" className="space-y-2">
          <div className="flex flex-wrap items-baseline justify-between gap-2">
            <h2 id="found-keys" className="text-sm font-semibold">
              Keys <span className="font-normal text-muted">{answer.keys.length}{answer.moreKeys ? "+" : ""}</span>
            </h2>
            {(answer.filter || answer.moreKeys) && (
              <Link data-testid="search-open-keys" className="text-[13px] font-medium text-accent hover:underline" href={keysListHref(answer.filter ?? { prefix: answer.query })}>
                Open in the keys list
              </Link>
            )}
          </div>
          <ul className="divide-y divide-line rounded-xl border border-line bg-surface" data-testid="search-keys">
            {answer.keys.map((k) => (
              <li key={`${k.scope}/${k.key}`} className="flex flex-wrap items-center gap-x-3 gap-y-1 px-4 py-2.5" data-testid="search-key">
                <StateBadge state={k.state} resultStatus={k.resultStatus} />
                <Link href={keyHref(k.scope, k.key)} className="min-w-0 break-all font-mono text-[13px] font-medium text-accent hover:underline">
                  {k.key}
                </Link>
                <span className="text-[12px] text-muted">
                  {k.scope} · {k.tool} · {when(k.createdAt)}
                </span>
              </li>
            ))}
          </ul>
        </section>
      )}
      {answer && answer.executions.length > 0 && (
        <section aria-labelledby="found-executions" className="space-y-2">
          <h2 id="found-executions" className="text-sm font-semibold">
            Executions{" "}
            <span className="font-normal text-muted" data-testid="search-executions-count">
              {answer.executions.length}
              {more > 0 && <> of {answer.argumentMatchesCapped ? "10,000+" : (answer.executions.length + more).toLocaleString("en-US")}</>}
            </span>
          </h2>
          {more > 0 && !answer.argumentMatchesCapped && (
            <p className="text-[13px] text-muted" data-testid="search-more">
              {answer.argumentMatches.toLocaleString("en-US")} calls hold this value: the newest {(answer.argumentMatches - more).toLocaleString("en-US")} are listed.
              {answer.argumentNames.length === 0 && (
                <>
                  {" "}
                  Name the argument (<code className="font-mono text-[12px]">name:value</code>) to narrow it.
                </>
              )}
            </p>
          )}
          {answer.argumentMatchesCapped && (
            <p className="text-[13px] text-muted" data-testid="search-capped">
              More than 10,000 calls hold this value: these are the newest of the first 10,000 found. Name the argument (<code className="font-mono text-[12px]">name:value</code>) or filter by tool to narrow it.
            </p>
          )}
          <ul className="divide-y divide-line rounded-xl border border-line bg-surface" data-testid="search-executions">
            {answer.executions.map((e) => (
              <li key={e.id} className="flex flex-wrap items-center gap-x-3 gap-y-1 px-4 py-2.5" data-testid="search-execution" data-matched={e.matched}>
                <Link href={keyHref(e.scope, e.key)} className="min-w-0 break-all font-mono text-[13px] font-medium text-accent hover:underline">
                  {e.key}
                </Link>
                <span className="text-[12px] text-muted">
                  {e.scope} · {e.tool} · {e.outcome ?? "no outcome"} · {when(e.startedAt)} · {e.matched === "id" ? "by its id" : "by its arguments"}
                </span>
                <span className="flex min-w-0 items-center gap-1">
                  <span className="break-all font-mono text-[12px] text-faint">{e.id}</span>
                  <CopyButton text={e.id} label="Copy id" />
                </span>
              </li>
            ))}
          </ul>
        </section>
      )}
    </div>
  );
}
