import type { Metadata } from "next";
import Link from "next/link";
import { notFound, redirect } from "next/navigation";
import { RunCalls } from "@/components/runs/run-calls";
import { requireOperator } from "@/lib/auth/require-operator";
import { metadataParam, pageParam } from "@/lib/console/page-param";
import { isIdemgateError } from "@/lib/idempotency/errors";
import { getRun, runPath, type RunPage as Run } from "@/lib/console/get-run";
import { scopesOfSession } from "@/lib/audit/run-calls";
import { getRuntime } from "@/lib/server/runtime";

export const dynamic = "force-dynamic";

type Props = { params: Promise<{ session: string }>; searchParams: Promise<{ scope?: string | string[]; cursor?: string | string[] }> };

export async function generateMetadata({ params }: Props): Promise<Metadata> {
  return { title: `Run ${metadataParam((await params).session)}` };
}

export default async function RunPage({ params, searchParams }: Props) {
  await requireOperator();
  const session = pageParam((await params).session);
  const query = await searchParams;
  const one = (v: string | string[] | undefined) => (typeof v === "string" && v !== "" ? v : null);
  if (session === null) notFound();
  const runtime = await getRuntime();
  if (!one(query.scope)) {
    // a session several tenants used (searched by `session:`): one run per scope
    const scopes = await scopesOfSession(runtime.db.prisma, session);
    if (scopes.length > 1) {
      return (
        <div className="space-y-3" data-testid="run-scopes">
          <h1 className="font-mono text-xl font-semibold tracking-tight break-all">{session}</h1>
          <p className="text-muted">Calls were sent with this session in more than one scope; each scope&apos;s calls are a run of their own:</p>
          <ul className="list-disc pl-5 text-[13px]">
            {scopes.map((s) => (
              <li key={s}>
                <Link href={runPath(s, session)} className="font-mono text-accent hover:underline">{s}</Link>
              </li>
            ))}
          </ul>
        </div>
      );
    }
  }
  let run: Run;
  try {
    run = await getRun(runtime, { session, scope: one(query.scope), cursor: one(query.cursor), limit: 200 });
  } catch (err) {
    if (isIdemgateError(err, "not_found") || isIdemgateError(err, "invalid_request")) notFound();
    // a cursor this server did not hand out (edited or cut short): the run from its first call
    if (isIdemgateError(err, "invalid_cursor")) {
      const scope = one(query.scope);
      redirect(scope ? runPath(scope, session) : `/runs/${encodeURIComponent(session)}`);
    }
    throw err;
  }
  const cursor = one(query.cursor);
  return (
    <div className="space-y-4">
      <nav aria-label="Breadcrumb" className="text-[13px] text-muted">
        <Link href="/runs" className="hover:text-fg hover:underline">Runs</Link>
        <span aria-hidden="true" className="px-1.5">/</span>
        <Link href={`/runs?scope=${encodeURIComponent(run.scope)}`} className="font-mono text-[12.5px] hover:text-fg hover:underline">{run.scope}</Link>
      </nav>
      <div>
        <h1 className="font-mono text-xl font-semibold tracking-tight break-all" data-testid="run-session">{run.session}</h1>
        <p className="mt-1 text-muted">
          Every call sent with this session in scope <span className="font-mono text-[12.5px]">{run.scope}</span>, in the order they arrived{cursor ? " (continued)" : ""}: each tool call that ran, each duplicate answered without running, and each call held for a decision.
        </p>
      </div>
      <section className="min-w-0 overflow-hidden rounded-xl border border-line bg-surface shadow-xs">
        <RunCalls calls={run.calls} />
      </section>
      {run.nextCursor && (
        <Link href={`${runPath(run.scope, run.session)}&cursor=${encodeURIComponent(run.nextCursor)}`} className="text-[13px] text-accent hover:underline" data-testid="run-next-page">
          Later calls
        </Link>
      )}
    </div>
  );
}
