import clsx from "clsx";

const STYLES: Record<string, string> = {
  inflight: "bg-accent-soft text-accent",
  stuck: "bg-warn-soft text-warn",
  unknown: "bg-unknown-soft text-unknown",
  done: "bg-ok-soft text-ok",
  expired: "bg-surface-2 text-muted",
  absent: "bg-surface-2 text-faint",
};

const DOTS: Record<string, string> = {
  inflight: "bg-accent",
  stuck: "bg-warn",
  unknown: "bg-unknown",
  done: "bg-ok",
  expired: "bg-faint",
  absent: "bg-faint",
};

/**
 * A key's state; with the stored result's status for a done key, so a stored final error (a
 * declined card's 402) reads as one and not as a success.
 */
export function StateBadge({ state, testId, resultStatus }: { state: string; testId?: string; resultStatus?: number | null }) {
  const finalError = state === "done" && resultStatus != null && resultStatus >= 400;
  const badge = (
    <span
      data-testid={testId}
      data-state={state}
      className={clsx("inline-flex items-center gap-1.5 rounded-full px-2 py-0.5 text-xs font-medium whitespace-nowrap", finalError ? STYLES.stuck : (STYLES[state] ?? STYLES.absent))}
    >
      <span aria-hidden="true" className={clsx("size-1.5 rounded-full", finalError ? DOTS.stuck : (DOTS[state] ?? DOTS.absent))} />
      {state}
    </span>
  );
  if (resultStatus == null) return badge;
  return (
    <span className="inline-flex items-center gap-1.5 whitespace-nowrap">
      {badge}
      <span
        className={clsx("font-mono text-[11.5px]", finalError ? "text-warn" : "text-muted")}
        data-testid="result-status"
        title={finalError ? `a final error is stored (HTTP ${resultStatus}) and replayed as is` : `stored result: HTTP ${resultStatus}`}
      >
        HTTP {resultStatus}
      </span>
    </span>
  );
}
