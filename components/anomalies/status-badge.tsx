import clsx from "clsx";

const STYLES: Record<string, { box: string; dot: string }> = {
  open: { box: "bg-bad-soft text-bad", dot: "bg-bad" },
  acknowledged: { box: "bg-warn-soft text-warn", dot: "bg-warn" },
  resolved: { box: "bg-ok-soft text-ok", dot: "bg-ok" },
};

/** open (needs someone), acknowledged (someone is on it), resolved (cause fixed) */
export function AnomalyStatusBadge({ status, testId }: { status: string; testId?: string }) {
  const s = STYLES[status] ?? { box: "bg-surface-2 text-muted", dot: "bg-faint" };
  return (
    <span data-testid={testId} data-status={status} className={clsx("inline-flex items-center gap-1.5 rounded-full px-2 py-0.5 text-xs font-medium", s.box)}>
      <span aria-hidden="true" className={clsx("size-1.5 rounded-full", s.dot)} />
      {status}
    </span>
  );
}
