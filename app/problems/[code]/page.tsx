import type { Metadata } from "next";
import Link from "next/link";
import { notFound } from "next/navigation";
import clsx from "clsx";
import { metadataParam, pageParam } from "@/lib/console/page-param";
import { allProblemDocs, problemDoc, RETRY_LABELS } from "@/lib/docs/problem-docs";

// Public, like the problem `type` URIs that point here: a caller reading an error needs no account.
export const dynamic = "force-dynamic";

type Props = { params: Promise<{ code: string }> };

export async function generateMetadata({ params }: Props): Promise<Metadata> {
  const doc = problemDoc(metadataParam((await params).code));
  return { title: doc ? `${doc.title} (${doc.status})` : "Unknown problem type" };
}

export default async function ProblemPage({ params }: Props) {
  const code = pageParam((await params).code);
  const doc = code === null ? null : problemDoc(code);
  if (!doc) notFound();
  const others = allProblemDocs().filter((p) => p.code !== code);

  return (
    <div className="mx-auto max-w-3xl space-y-6">
      <nav aria-label="Breadcrumb" className="text-xs text-muted">
        Problem types <span className="px-1.5 text-faint">/</span>
      </nav>
      <article data-testid="problem-doc" className="overflow-hidden rounded-xl border border-line bg-surface shadow-xs">
        <header className="border-b border-line px-6 py-5">
          <p className="font-mono text-[12.5px] text-muted">/problems/{doc.code}</p>
          <h1 className="mt-1 flex flex-wrap items-center gap-3 text-xl font-semibold tracking-tight">
            {doc.title}
            <span
              className={clsx(
                "rounded-md px-2 py-0.5 font-mono text-[13px] font-semibold",
                doc.status >= 500 ? "bg-bad-soft text-bad" : "bg-warn-soft text-warn",
              )}
            >
              HTTP {doc.status}
            </span>
          </h1>
        </header>
        <div className="space-y-5 px-6 py-5 text-[14px] leading-6">
          <section>
            <h2 className="text-xs font-medium tracking-wide text-muted uppercase">What happened</h2>
            <p className="mt-1">{doc.happened}</p>
          </section>
          <section>
            <h2 className="text-xs font-medium tracking-wide text-muted uppercase">What to do</h2>
            <p className="mt-1">{doc.todo}</p>
          </section>
          <section>
            <h2 className="text-xs font-medium tracking-wide text-muted uppercase">Send it again?</h2>
            <p className="mt-1">{RETRY_LABELS[doc.retry]}</p>
          </section>
          <section>
            <h2 className="text-xs font-medium tracking-wide text-muted uppercase">Example body</h2>
            <pre tabIndex={0} className="mt-1.5 overflow-x-auto rounded-lg border border-line bg-surface-2 px-3 py-2.5 font-mono text-[12px] leading-5">
              {JSON.stringify({ type: `/problems/${doc.code}`, title: doc.title, status: doc.status, detail: "…" }, null, 2)}
            </pre>
          </section>
        </div>
      </article>
      <section>
        <h2 className="mb-2 text-xs font-medium tracking-wide text-muted uppercase">Other problem types</h2>
        <ul className="grid gap-x-6 gap-y-1 text-[13px] sm:grid-cols-2">
          {others.map((p) => (
            <li key={p.code} className="flex gap-2">
              <span className="w-8 font-mono text-[12px] text-faint tabular-nums">{p.status}</span>
              <Link href={`/problems/${p.code}`} className="text-accent hover:underline">
                {p.title}
              </Link>
            </li>
          ))}
        </ul>
      </section>
    </div>
  );
}
