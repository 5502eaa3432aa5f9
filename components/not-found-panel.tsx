import Link from "next/link";
import { NAV_ITEMS } from "./app-header";

/** The console's answer to a URL that names nothing: where to go instead. */
export function NotFoundPanel() {
  return (
    <div data-testid="not-found" className="rounded-xl border border-dashed border-line-strong px-6 py-12 text-center">
      <p className="text-xs font-medium tracking-wide text-muted uppercase">404</p>
      <h1 className="mt-1 text-lg font-semibold">This page could not be found</h1>
      <p className="mt-2 text-[13px] text-muted">The link may be mistyped, or what it named is gone.</p>
      <nav aria-label="Console pages" className="mt-4 flex flex-wrap justify-center gap-x-4 gap-y-1 text-[13px]">
        {NAV_ITEMS.map((item) => (
          <Link key={item.href} href={item.href} className="text-accent underline">{item.label}</Link>
        ))}
      </nav>
    </div>
  );
}
