"use client";

import { useEffect, useState } from "react";
import { buttonClass, inputClass } from "@/components/ui/styles";
import { KEY_STATES, type KeyState } from "@/lib/idempotency/record";

export { KEY_STATES };
export type KeyStateFilter = KeyState;

type Patch = Partial<{ state: KeyStateFilter | null; tool: string | null; scope: string | null; prefix: string | null }>;

/** A text field that writes to the URL after the operator pauses typing (or presses Enter). */
function useDebouncedField(value: string | null, apply: (v: string | null) => void, delayMs = 350) {
  const [text, setText] = useState(value ?? "");
  useEffect(() => setText(value ?? ""), [value]);
  useEffect(() => {
    if (text === (value ?? "")) return;
    const t = setTimeout(() => apply(text.trim() || null), delayMs);
    return () => clearTimeout(t);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [text]);
  return { text, setText, flush: () => apply(text.trim() || null) };
}

export function KeysFilters(props: {
  tools: string[];
  state: KeyStateFilter | null;
  tool: string | null;
  scope: string | null;
  prefix: string | null;
  onChange: (patch: Patch) => void;
  onClear: () => void;
  /** at the end of the bar: the saved views */
  views?: React.ReactNode;
}) {
  const { onChange } = props;
  const prefix = useDebouncedField(props.prefix, (v) => onChange({ prefix: v }));
  const scope = useDebouncedField(props.scope, (v) => onChange({ scope: v }));
  const any = props.state || props.tool || props.scope || props.prefix;

  return (
    <form
      role="search"
      aria-label="Filter keys"
      className="flex flex-wrap items-end gap-3 rounded-xl border border-line bg-surface px-4 py-3 shadow-xs"
      onSubmit={(e) => {
        e.preventDefault();
        prefix.flush();
        scope.flush();
      }}
    >
      <div className="space-y-1">
        <label htmlFor="filter-state" className="block text-xs font-medium text-muted">State</label>
        <select
          id="filter-state"
          data-testid="filter-state"
          value={props.state ?? ""}
          onChange={(e) => onChange({ state: (e.target.value || null) as KeyStateFilter | null })}
          className={inputClass}
        >
          <option value="">Any state</option>
          {KEY_STATES.map((s) => (
            <option key={s} value={s}>{s}</option>
          ))}
        </select>
      </div>
      <div className="space-y-1">
        <label htmlFor="filter-tool" className="block text-xs font-medium text-muted">Tool</label>
        <select
          id="filter-tool"
          data-testid="filter-tool"
          value={props.tool ?? ""}
          onChange={(e) => onChange({ tool: e.target.value || null })}
          className={inputClass}
        >
          <option value="">Any tool</option>
          {[...new Set([...props.tools, ...(props.tool ? [props.tool] : [])])].map((t) => (
            <option key={t} value={t}>{t}</option>
          ))}
        </select>
      </div>
      <div className="space-y-1">
        <label htmlFor="filter-scope" className="block text-xs font-medium text-muted">Scope</label>
        <input
          id="filter-scope"
          data-testid="filter-scope"
          value={scope.text}
          onChange={(e) => scope.setText(e.target.value)}
          placeholder="any scope"
          className={`${inputClass} w-36`}
          autoComplete="off"
        />
      </div>
      <div className="min-w-48 flex-1 space-y-1">
        <label htmlFor="filter-prefix" className="block text-xs font-medium text-muted">Key starts with</label>
        <input
          id="filter-prefix"
          type="search"
          data-testid="filter-prefix"
          value={prefix.text}
          onChange={(e) => prefix.setText(e.target.value)}
          placeholder="e.g. order-1234"
          className={`${inputClass} w-full font-mono`}
          autoComplete="off"
          spellCheck={false}
        />
      </div>
      <button type="submit" className="sr-only">Apply filters</button>
      {any && (
        <button type="button" className={buttonClass("ghost")} onClick={props.onClear} data-testid="filter-clear">
          Clear filters
        </button>
      )}
      {props.views && <div className="ml-auto">{props.views}</div>}
    </form>
  );
}
