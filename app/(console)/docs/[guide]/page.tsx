import type { Metadata } from "next";
import { notFound } from "next/navigation";
import { DocsNav } from "@/components/docs/docs-nav";
import { Markdown } from "@/components/docs/markdown";
import { requireOperator } from "@/lib/auth/require-operator";
import { findGuide, readGuide } from "@/lib/docs/guides";

export const dynamic = "force-dynamic";

type Params = { params: Promise<{ guide: string }> };

export async function generateMetadata({ params }: Params): Promise<Metadata> {
  return { title: findGuide((await params).guide)?.title ?? "Docs" };
}

// /docs/{guide} – one of the user guides in docs/ (concepts, integrate, operate), rendered from its Markdown
export default async function GuidePage({ params }: Params) {
  await requireOperator();
  const guide = findGuide((await params).guide);
  if (!guide) notFound();
  const source = await readGuide(guide.slug);
  const sections = [...source.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
  return (
    <div className="grid gap-8 lg:grid-cols-[12rem_1fr]">
      <DocsNav current={guide.slug} sections={sections} />
      <article data-testid="guide" data-guide={guide.slug} className="min-w-0 max-w-3xl text-[14px]">
        <Markdown source={source} />
      </article>
    </div>
  );
}
