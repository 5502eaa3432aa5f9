import Link from "next/link";

export default function AnomalyNotFound() {
  return (
    <div data-testid="anomaly-not-found" className="rounded-xl border border-dashed border-line-strong px-6 py-10 text-center">
      <p className="font-medium">No such anomaly.</p>
      <p className="mt-1 text-[13px] text-muted">
        The link may be mistyped. <Link href="/anomalies?status=any" className="text-accent underline">See every anomaly</Link>.
      </p>
    </div>
  );
}
