import type { Metadata } from "next";
import Link from "next/link";
import { DocsNav } from "@/components/docs/docs-nav";
import { requireOperator } from "@/lib/auth/require-operator";
import { GUIDES } from "@/lib/docs/guides";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Docs" };

// /docs – the user guides and the API reference
export default async function DocsPage() {
  await requireOperator();
  const pages = [
    ...GUIDES.map((guide) => ({ href: `/docs/${guide.slug}`, title: guide.title as string, summary: guide.summary as string })),
    { href: "/docs/api", title: "API reference", summary: "Every tool's arguments and results, the gateway's headers, and what each problem type means." },
  ];
  return (
    <div className="grid gap-8 lg:grid-cols-[12rem_1fr]">
      <DocsNav current="" />
      <div className="max-w-3xl">
        <h1 className="mb-4 text-2xl font-semibold tracking-tight">Docs</h1>
        <ul className="grid gap-3 sm:grid-cols-2" data-testid="docs-index">
          {pages.map((page) => (
            <li key={page.href}>
              <Link href={page.href} className="block h-full rounded-lg border border-line bg-surface p-4 hover:bg-surface-2">
                <span className="font-medium">{page.title}</span>
                <span className="mt-1 block text-[13px] text-muted">{page.summary}</span>
              </Link>
            </li>
          ))}
        </ul>
      </div>
    </div>
  );
}
