"use client";

import { useEffect, useRef } from "react";
import { inputClass } from "@/components/ui/styles";

/** The header's search box: a plain GET form to /search, focused by `/` outside other fields. */
export function SearchBox() {
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== "/" || e.metaKey || e.ctrlKey || e.altKey) return;
      const t = e.target as HTMLElement | null;
      if (t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName))) return;
      e.preventDefault();
      input.current?.focus();
      input.current?.select();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
  return (
    <form role="search" action="/search" method="get" className="shrink-0">
      <label htmlFor="console-search" className="sr-only">
        Search keys, executions and arguments
      </label>
      <input
        ref={input}
        id="console-search"
        name="q"
        type="search"
        required
        maxLength={255}
        data-testid="console-search"
        placeholder="Search  /"
        autoComplete="off"
        spellCheck={false}
        className={`${inputClass} w-28 py-1 sm:w-44 lg:w-20 xl:w-36`}
      />
    </form>
  );
}
