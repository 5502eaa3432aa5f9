import { buttonClass } from "@/components/ui/styles";
import { formatDuration } from "@/lib/console/format";
import { TYPE_INFO, TYPES } from "./anomaly-types";

function every(ms: number): string {
  if (ms === 60_000) return "every minute";
  return `every ${formatDuration(ms)}`;
}

export function AnomaliesEmpty(props: { filtered: boolean; status: string; intervalMs: number; canReconcile: boolean; onClear: () => void }) {
  if (props.filtered) {
    return (
      <div data-testid="anomalies-empty" className="rounded-xl border border-dashed border-line-strong px-6 py-10 text-center">
        <p className="font-medium">No {props.status === "any" ? "" : `${props.status} `}anomalies match these filters.</p>
        <p className="mt-1 text-[13px] text-muted">Widen the filters, or go back to every open anomaly.</p>
        <button type="button" className={`${buttonClass("secondary")} mt-4`} onClick={props.onClear}>
          Show open anomalies
        </button>
      </div>
    );
  }
  return (
    <div data-testid="anomalies-empty" className="rounded-xl border border-dashed border-line-strong px-6 py-8">
      <p className="font-medium">No open anomalies.</p>
      <p className="mt-1 text-[13px] text-muted">
        {props.intervalMs > 0 ? (
          <>The reconciler compares the audit log, the key store and the tools&apos; own records {every(props.intervalMs)}, looking for:</>
        ) : (
          <>
            The background reconciler is off (<code className="font-mono text-[12px]">IDEMGATE_RECONCILE_INTERVAL_MS=0</code>); a pass
            {props.canReconcile ? " from the button above" : ""} or <code className="font-mono text-[12px]">npx idemgate reconcile</code> looks for:
          </>
        )}
      </p>
      <ul className="mt-2 list-disc space-y-0.5 pl-5 text-[13px] text-muted">
        {TYPES.map((t) => (
          <li key={t}>
            <span className="text-fg">{TYPE_INFO[t].label}</span>: {TYPE_INFO[t].watches}
          </li>
        ))}
      </ul>
    </div>
  );
}
