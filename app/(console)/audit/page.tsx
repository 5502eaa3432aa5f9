import type { Metadata } from "next";
import Link from "next/link";
import { AuditFilters, type AuditFilterValues } from "@/components/audit/audit-filters";
import { AuditTrail } from "@/components/audit/audit-table";
import { buttonClass } from "@/components/ui/styles";
import { keyHref } from "@/lib/console/api";
import { AUDIT_ACTIONS, parseAuditTrailFilters } from "@/lib/audit/audit-trail-filters";
import { listOperatorActions } from "@/lib/audit/operator-actions";
import { operatorActionFacets } from "@/lib/audit/operator-action-facets";
import { requireOperator } from "@/lib/auth/require-operator";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Audit trail" };

const PAGE_SIZE = 50;
/** stands for "the first page" in the trail of earlier cursors */
const FIRST = "-";
const FILTERS = ["from", "to", "actor", "action", "target", "scope", "key"] as const;

function href(params: Partial<Record<(typeof FILTERS)[number] | "cursor" | "trail", string>>): string {
  const q = new URLSearchParams(Object.entries(params).filter(([, v]) => v) as [string, string][]);
  const s = q.toString();
  return s ? `/audit?${s}` : "/audit";
}

export default async function AuditPage({ searchParams }: { searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  await requireOperator();
  const raw = await searchParams;
  const one = (k: string) => {
    const v = raw[k];
    return (Array.isArray(v) ? v[0] : v)?.trim() || undefined;
  };
  // the filters as written in the URL, carried unchanged into every link
  const values: AuditFilterValues = Object.fromEntries(FILTERS.map((f) => [f, one(f)]));
  // one key's actions: the key page links here
  if (!values.scope) values.key = undefined;
  const cursor = one("cursor");
  const trail = one("trail")?.split(",").filter(Boolean) ?? [];
  const parsed = parseAuditTrailFilters(values);
  const filtered = FILTERS.some((f) => values[f]);

  const { prisma } = (await getRuntime()).db;
  const [page, facets] = await Promise.all([
    parsed.ok ? listOperatorActions(prisma, { ...parsed.filters, limit: PAGE_SIZE, cursor: cursor ?? null }).catch(() => null) : null,
    operatorActionFacets(prisma),
  ]);

  const newer =
    trail.length > 0
      ? href({ ...values, cursor: trail[trail.length - 1] === FIRST ? undefined : trail[trail.length - 1], trail: trail.slice(0, -1).join(",") })
      : null;
  const older = page?.nextCursor ? href({ ...values, cursor: page.nextCursor, trail: [...trail, cursor ?? FIRST].join(",") }) : null;
  const { scope, key } = values;

  return (
    <div className="space-y-4">
      <div>
        <h1 className="text-xl font-semibold tracking-tight">Audit trail</h1>
        <p className="mt-1 text-muted">
          Every operator action: releases and resolutions, anomaly decisions, calls run from the console, API tokens created and revoked. Who, when, why, and the state
          before and after. Newest first; times in UTC.
        </p>
      </div>
      <AuditFilters actors={facets.actors} actions={[...AUDIT_ACTIONS]} values={values} />
      {scope && (
        <p className="text-[13px] text-muted" data-testid="audit-key-filter">
          Actions on {key ? <>key <Link href={keyHref(scope, key)} className="font-mono text-[12.5px] text-accent hover:underline">{key}</Link> in </> : null}scope{" "}
          <span className="font-mono text-[12.5px]">{scope}</span> only. <Link href={href({ ...values, scope: undefined, key: undefined })} className="text-accent underline">Show every key</Link>
        </p>
      )}
      {!parsed.ok ? (
        <div role="alert" data-testid="audit-filter-error" className="rounded-lg border border-bad/30 bg-bad-soft px-4 py-3 text-[13px] text-bad">
          <p className="font-medium">These filters cannot be applied, so nothing is listed:</p>
          <ul className="mt-1 list-disc pl-5">
            {parsed.problems.map((p) => (
              <li key={p.field + p.message}>
                <span className="font-medium">{p.field}</span>: {p.message}
              </li>
            ))}
          </ul>
          <p className="mt-1">Correct them above, or <Link href="/audit" className="underline">clear the filters</Link>.</p>
        </div>
      ) : page === null ? (
        <p role="alert" className="rounded-lg border border-bad/30 bg-bad-soft px-4 py-3 text-[13px] text-bad">
          That page of the trail could not be read (the cursor may be stale). <Link href={href(values)} className="underline">Start from the newest</Link>.
        </p>
      ) : page.items.length === 0 ? (
        <div data-testid="audit-empty" className="rounded-xl border border-dashed border-line-strong px-6 py-10 text-center">
          <p className="font-medium">{filtered ? "No actions match these filters." : "No operator actions yet."}</p>
          <p className="mt-1 text-[13px] text-muted">
            {filtered ? (
              <Link href="/audit" className="text-accent underline">Clear the filters</Link>
            ) : (
              <>Releasing or resolving a key on the <Link href="/keys" className="text-accent underline">Keys</Link> page records it here.</>
            )}
          </p>
        </div>
      ) : (
        <AuditTrail items={page.items.map((a) => ({ ...a, at: a.at.toISOString() }))} />
      )}
      <nav aria-label="Pages" className="flex justify-end gap-2">
        {newer ? <Link href={newer} className={buttonClass("secondary", "sm")} data-testid="audit-newer">← Newer</Link> : <span className={buttonClass("secondary", "sm") + " pointer-events-none opacity-50"} aria-disabled="true">← Newer</span>}
        {older ? <Link href={older} className={buttonClass("secondary", "sm")} data-testid="audit-older">Older →</Link> : <span className={buttonClass("secondary", "sm") + " pointer-events-none opacity-50"} aria-disabled="true">Older →</span>}
      </nav>
    </div>
  );
}
