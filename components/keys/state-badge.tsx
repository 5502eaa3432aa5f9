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

export function StateBadge({ state, testId }: { state: string; testId?: string }) {
  return (
    <span
      data-testid={testId}
      data-state={state}
      className={clsx("inline-flex items-center gap-1.5 rounded-full px-2 py-0.5 text-xs font-medium", STYLES[state] ?? STYLES.absent)}
    >
      <span aria-hidden="true" className={clsx("size-1.5 rounded-full", DOTS[state] ?? DOTS.absent)} />
      {state}
    </span>
  );
}
