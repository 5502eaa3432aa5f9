import type { Metadata } from "next";
import Link from "next/link";
import { AuditFilters } from "@/components/audit/audit-filters";
import { AuditTable } from "@/components/audit/audit-table";
import { buttonClass } from "@/components/ui/styles";
import { keyHref } from "@/lib/console/api";
import { listOperatorActions } from "@/lib/audit/operator-actions";
import { operatorActionFacets } from "@/lib/audit/operator-action-facets";
import { requireOperator } from "@/lib/auth/require-operator";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Audit trail" };

const PAGE_SIZE = 50;
/** stands for "the first page" in the trail of earlier cursors */
const FIRST = "-";

type Search = { actor?: string; action?: string; scope?: string; key?: string; cursor?: string; trail?: string };

function href(params: Search): string {
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
  const actor = one("actor");
  const action = one("action");
  // one key's actions: the key page links here
  const scope = one("scope");
  const key = scope ? one("key") : undefined;
  const cursor = one("cursor");
  const trail = one("trail")?.split(",").filter(Boolean) ?? [];

  const { prisma } = (await getRuntime()).db;
  const [page, facets] = await Promise.all([
    listOperatorActions(prisma, { limit: PAGE_SIZE, cursor: cursor ?? null, actor, action, scope, key }).catch(() => null),
    operatorActionFacets(prisma),
  ]);

  const newer =
    trail.length > 0
      ? href({ actor, action, scope, key, cursor: trail[trail.length - 1] === FIRST ? undefined : trail[trail.length - 1], trail: trail.slice(0, -1).join(",") })
      : null;
  const older = page?.nextCursor ? href({ actor, action, scope, key, cursor: page.nextCursor, trail: [...trail, cursor ?? FIRST].join(",") }) : null;

  return (
    <div className="space-y-4">
      <div>
        <h1 className="text-xl font-semibold tracking-tight">Audit trail</h1>
        <p className="mt-1 text-muted">Every operator action: who, when, why, and the key&apos;s state before and after. Newest first.</p>
      </div>
      <AuditFilters actors={facets.actors} actions={facets.actions} actor={actor} action={action} scope={scope} keyName={key} />
      {scope && (
        <p className="text-[13px] text-muted" data-testid="audit-key-filter">
          Actions on {key ? <>key <Link href={keyHref(scope, key)} className="font-mono text-[12.5px] text-accent hover:underline">{key}</Link> in </> : null}scope{" "}
          <span className="font-mono text-[12.5px]">{scope}</span> only. <Link href={href({ actor, action })} className="text-accent underline">Show every key</Link>
        </p>
      )}
      {page === null ? (
        <p role="alert" className="rounded-lg border border-bad/30 bg-bad-soft px-4 py-3 text-[13px] text-bad">
          That page of the trail could not be read (the cursor may be stale). <Link href={href({ actor, action })} className="underline">Start from the newest</Link>.
        </p>
      ) : page.items.length === 0 ? (
        <div data-testid="audit-empty" className="rounded-xl border border-dashed border-line-strong px-6 py-10 text-center">
          <p className="font-medium">{actor || action || scope ? "No actions match these filters." : "No operator actions yet."}</p>
          <p className="mt-1 text-[13px] text-muted">
            {actor || action || scope ? (
              <Link href="/audit" className="text-accent underline">Clear the filters</Link>
            ) : (
              <>Releasing or resolving a key on the <Link href="/keys" className="text-accent underline">Keys</Link> page records it here.</>
            )}
          </p>
        </div>
      ) : (
        <AuditTable items={page.items.map((a) => ({ ...a, at: a.at.toISOString() }))} />
      )}
      <nav aria-label="Pages" className="flex justify-end gap-2">
        {newer ? <Link href={newer} className={buttonClass("secondary", "sm")} data-testid="audit-newer">← Newer</Link> : <span className={buttonClass("secondary", "sm") + " pointer-events-none opacity-50"} aria-disabled="true">← Newer</span>}
        {older ? <Link href={older} className={buttonClass("secondary", "sm")} data-testid="audit-older">Older →</Link> : <span className={buttonClass("secondary", "sm") + " pointer-events-none opacity-50"} aria-disabled="true">Older →</span>}
      </nav>
    </div>
  );
}
