import Link from "next/link";
import { formatCount, formatTimestamp } from "@/lib/console/format";

export interface HeldRun {
  scope: string;
  session: string;
  held: number;
  lastAt: string;
  path: string;
}

/** Runs with calls held for a decision (stuck or unknown), on the overview's first screen. */
export function HeldRuns({ runs }: { runs: HeldRun[] }) {
  if (runs.length === 0) return null;
  return (
    <section aria-labelledby="held-runs-heading" data-testid="held-runs" className="rounded-xl border border-unknown/40 bg-unknown-soft px-5 py-4">
      <h2 id="held-runs-heading" className="text-xs font-medium tracking-wide uppercase">
        Runs with held calls
      </h2>
      <ul className="mt-2 space-y-1 text-[13px]">
        {runs.map((r) => (
          <li key={`${r.scope}\n${r.session}`} data-testid="held-run" className="min-w-0 break-all">
            <Link href={r.path} className="font-mono font-medium text-accent hover:underline">
              {r.session}
            </Link>{" "}
            <span className="text-muted">
              in <span className="font-mono">{r.scope}</span>: {formatCount(r.held)} held · last call {formatTimestamp(r.lastAt)}
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}
