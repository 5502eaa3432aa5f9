"use client";

import clsx from "clsx";
import { POLL_CHOICES } from "./use-poll-interval";

/** Off / 2s / 5s / 15s as a segmented radio group, plus a live indicator while a request runs. */
export function PollControl({ value, onChange, fetching }: { value: number; onChange: (ms: number) => void; fetching: boolean }) {
  return (
    <div className="flex items-center gap-2">
      <span aria-live="polite" className="flex items-center gap-1.5 text-xs text-faint">
        <span aria-hidden="true" className={clsx("size-1.5 rounded-full", fetching ? "animate-pulse bg-accent" : value ? "bg-ok" : "bg-faint")} />
        <span className="sr-only">{fetching ? "refreshing" : ""}</span>
      </span>
      <fieldset className="flex items-center gap-1" data-testid="poll-interval">
        <legend className="sr-only">Refresh every</legend>
        <span aria-hidden="true" className="mr-1 text-xs text-muted">Refresh</span>
        <div className="flex rounded-md border border-line-strong p-0.5">
          {POLL_CHOICES.map((c) => (
            <label
              key={c.ms}
              className={clsx(
                "cursor-pointer rounded px-2 py-0.5 text-xs font-medium has-[:focus-visible]:outline-2 has-[:focus-visible]:outline-accent",
                value === c.ms ? "bg-surface-2 text-fg" : "text-muted hover:text-fg",
              )}
            >
              <input type="radio" name="poll" value={c.ms} checked={value === c.ms} onChange={() => onChange(c.ms)} className="sr-only" />
              {c.label}
            </label>
          ))}
        </div>
      </fieldset>
    </div>
  );
}
