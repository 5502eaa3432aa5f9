import Link from "next/link";
import { unstable_rethrow } from "next/navigation";
import { signOut } from "@/lib/auth/sign-in-actions";
import { MobileNav } from "@/components/mobile-nav";
import { NavLink } from "@/components/nav-link";
import { SearchBox } from "@/components/search-box";
import { buttonClass } from "@/components/ui/styles";
import { can, type OperatorIdentity, type Permission } from "@/lib/auth/roles";
import { currentOperator } from "@/lib/auth/session";

/** Console sections, in the order they appear. Add a page here when it exists; `permission`: shown only to roles that have it. */
export const NAV_ITEMS: { href: string; label: string; permission?: Permission }[] = [
  { href: "/", label: "Overview" },
  { href: "/keys", label: "Keys" },
  { href: "/runs", label: "Runs" },
  { href: "/tools", label: "Tools" },
  { href: "/anomalies", label: "Anomalies" },
  { href: "/webhooks", label: "Webhooks" },
  { href: "/audit", label: "Audit trail" },
  { href: "/tokens", label: "API tokens", permission: "manage_tokens" },
  { href: "/docs", label: "Docs" },
  { href: "/status", label: "Status" },
];

/** The header only shows the console's sections to someone signed in (not on /login). */
async function signedInOperator(): Promise<OperatorIdentity | null> {
  try {
    return await currentOperator();
  } catch (err) {
    unstable_rethrow(err);
    // no database: the page itself says so (the status page shows the start-up error)
    return null;
  }
}

export async function AppHeader() {
  const operator = await signedInOperator();
  const items = operator ? NAV_ITEMS.filter((item) => !item.permission || can(operator.role, item.permission)).map(({ href, label }) => ({ href, label })) : [];
  return (
    <header className="sticky top-0 z-20 border-b border-line bg-surface/85 backdrop-blur">
      <div className="mx-auto flex h-12 w-full max-w-6xl items-center gap-4 px-4 sm:px-6 xl:gap-6">
        <Link href="/" className="flex shrink-0 items-center gap-2 font-semibold tracking-tight">
          <Logo />
          <span>Idemgate</span>
        </Link>
        {operator && (
          <>
            <nav aria-label="Console" className="hidden shrink-0 items-center gap-0.5 lg:flex">
              {items.map((item) => (
                <NavLink key={item.href} href={item.href}>
                  {item.label}
                </NavLink>
              ))}
            </nav>
            <div className="ml-auto flex min-w-0 items-center gap-2">
              <SearchBox />
              <span className="hidden min-w-0 items-center gap-2 sm:flex lg:shrink-0" data-testid="signed-in-as">
                {/* from lg the full nav needs the room (narrower links, gaps and search box below xl): the
                    email is then in the title of the role, which does not shrink under Sign out */}
                <span className="truncate text-[13px] text-muted lg:hidden" title={operator.email}>
                  {operator.email}
                </span>
                <span data-testid="operator-role" title={operator.email} className="rounded-full bg-surface-2 px-2 py-0.5 text-[11px] font-medium text-muted">
                  {operator.role}
                </span>
              </span>
              <form action={signOut}>
                <button type="submit" className={buttonClass("ghost", "sm")} data-testid="sign-out">
                  Sign out
                </button>
              </form>
              <MobileNav items={items} email={operator.email} role={operator.role} />
            </div>
          </>
        )}
      </div>
    </header>
  );
}

/** Two arrows meeting one gate: many attempts, one execution. */
function Logo() {
  return (
    <svg viewBox="0 0 20 20" className="size-5 text-accent" aria-hidden="true">
      <rect x="1" y="1" width="18" height="18" rx="5" fill="currentColor" />
      <path d="M5 6.5h4.5M5 13.5h4.5M9.5 6.5 12 10l-2.5 3.5M12 10h3.5" stroke="var(--accent-fg)" strokeWidth="1.6" fill="none" strokeLinecap="round" strokeLinejoin="round" />
    </svg>
  );
}
