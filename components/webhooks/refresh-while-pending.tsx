"use client";

import { useRouter } from "next/navigation";
import { useEffect } from "react";

/**
 * Reads the delivery log again every few seconds while some delivery is still pending, so an attempt
 * that ends after the page was drawn shows as delivered or retrying without a reload. Stops when
 * nothing is pending or the tab is hidden.
 */
export function RefreshWhilePending({ pending, everyMs = 2_000 }: { pending: number; everyMs?: number }) {
  const router = useRouter();
  useEffect(() => {
    if (pending === 0) return;
    const timer = setInterval(() => {
      if (document.visibilityState === "visible") router.refresh();
    }, everyMs);
    return () => clearInterval(timer);
  }, [pending, everyMs, router]);
  return null;
}
