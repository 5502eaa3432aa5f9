import { KeptArguments } from "@/components/keys/kept-arguments";
import type { AnomalyArguments } from "@/lib/anomalies/anomaly-arguments";

const LABEL: Record<AnomalyArguments["role"], string> = {
  call: "Arguments of the call",
  original: "Arguments of the original call",
  duplicate: "Arguments of the duplicate",
};

/**
 * The arguments of the calls an anomaly's evidence names, as their executions kept them. A
 * fresh-key duplicate's two calls have the same fingerprint, so their arguments are shown once.
 */
export function EvidenceArguments({ items }: { items: AnomalyArguments[] | undefined }) {
  if (!items || items.length === 0) return null;
  const same = items.length === 2 && JSON.stringify(items[0].value) === JSON.stringify(items[1].value);
  const shown = same ? [{ ...items[0], label: "Arguments (the same for both calls)" }] : items.map((i) => ({ ...i, label: LABEL[i.role] }));
  return (
    <div className="space-y-4 border-t border-line px-5 py-4" data-testid="evidence-arguments">
      {shown.map((a) => (
        <div key={a.executionId}>
          <p className="mb-1 text-[13px] font-medium">{a.label}</p>
          <KeptArguments value={a.value} kept={a.kept} testId={`evidence-arguments-${a.role}`} />
        </div>
      ))}
    </div>
  );
}
