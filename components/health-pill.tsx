import clsx from "clsx";

export function HealthPill({ ok, testId }: { ok: boolean; testId?: string }) {
  return (
    <span
      data-testid={testId}
      data-ok={ok}
      className={clsx(
        "inline-flex items-center gap-1.5 rounded-full px-2 py-0.5 text-xs font-medium",
        ok ? "bg-ok-soft text-ok" : "bg-bad-soft text-bad",
      )}
    >
      <span aria-hidden="true" className={clsx("size-1.5 rounded-full", ok ? "bg-ok" : "bg-bad")} />
      {ok ? "Reachable" : "Unreachable"}
    </span>
  );
}
