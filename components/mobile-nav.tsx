"use client";

import { usePathname } from "next/navigation";
import { useEffect, useRef } from "react";
import { NavLink } from "@/components/nav-link";

/** Below the lg breakpoint the sections fold into a menu; it closes again after each navigation. */
export function MobileNav({ items, email, role }: { items: { href: string; label: string }[]; email: string; role: string }) {
  const ref = useRef<HTMLDetailsElement>(null);
  const pathname = usePathname();
  useEffect(() => {
    if (ref.current) ref.current.open = false;
  }, [pathname]);
  return (
    <details
      ref={ref}
      className="relative lg:hidden"
      onKeyDown={(e) => {
        if (e.key === "Escape" && ref.current?.open) {
          ref.current.open = false;
          ref.current.querySelector("summary")?.focus();
        }
      }}
    >
      <summary
        aria-label="Menu"
        className="flex cursor-pointer list-none items-center rounded-md border border-line-strong px-2 py-1 text-xs font-medium text-muted hover:text-fg [&::-webkit-details-marker]:hidden"
      >
        Menu
      </summary>
      <div className="absolute right-0 mt-2 w-56 rounded-lg border border-line bg-surface p-2 shadow-lg">
        <p className="truncate px-2.5 pb-2 text-xs text-muted sm:hidden">
          {email} · {role}
        </p>
        <nav aria-label="Console (menu)" className="flex flex-col gap-0.5">
          {items.map((item) => (
            <NavLink key={item.href} href={item.href}>
              {item.label}
            </NavLink>
          ))}
        </nav>
      </div>
    </details>
  );
}
