import clsx from "clsx";
import Link from "next/link";
import { GUIDES, headingId } from "@/lib/docs/guides";

/** The docs' side navigation: the guides and the API reference, and the current guide's sections. */
export function DocsNav({ current, sections = [] }: { current: string; sections?: string[] }) {
  const pages = [...GUIDES.map((guide) => ({ href: `/docs/${guide.slug}`, slug: guide.slug as string, title: guide.title as string })), { href: "/docs/api", slug: "api", title: "API reference" }];
  return (
    <aside className="hidden lg:block">
      <nav aria-label="Docs" className="sticky top-20 space-y-4 text-[13px]">
        <div>
          <p className="mb-1.5 text-xs font-medium tracking-wide text-muted uppercase">Docs</p>
          <ul className="space-y-1">
            {pages.map((page) => (
              <li key={page.slug}>
                <Link href={page.href} aria-current={page.slug === current ? "page" : undefined} className={clsx(page.slug === current ? "font-medium text-fg" : "text-muted hover:text-fg")}>
                  {page.title}
                </Link>
              </li>
            ))}
          </ul>
        </div>
        {sections.length > 0 && (
          <div>
            <p className="mb-1.5 text-xs font-medium tracking-wide text-muted uppercase">On this page</p>
            <ul className="space-y-1">
              {sections.map((section) => (
                <li key={section}>
                  <a href={`#${headingId(section)}`} className="text-muted hover:text-fg">
                    {section.replace(/`/g, "")}
                  </a>
                </li>
              ))}
            </ul>
          </div>
        )}
      </nav>
    </aside>
  );
}
