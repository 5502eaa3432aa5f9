import Link from "next/link";
import clsx from "clsx";
import { formatCount } from "@/lib/console/format";
import type { ToolOverview } from "@/lib/console/get-overview";

const CALLS = [
  { label: "Executions", n: (a: ToolOverview) => a.executions, testId: "executions" },
  { label: "Replays", n: (a: ToolOverview) => a.suppressions.replay },
  { label: "Conflicts", n: (a: ToolOverview) => a.suppressions.conflict },
  { label: "Mismatches", n: (a: ToolOverview) => a.suppressions.mismatch },
] as const;

const HELD = [
  { label: "Stuck", state: "stuck" },
  { label: "Unknown", state: "unknown" },
] as const;

function ToolLink({ tool, className }: { tool: string; className?: string }) {
  return (
    <Link href={`/tools/${encodeURIComponent(tool)}`} className={clsx("font-mono text-[12.5px] text-accent hover:underline", className)} data-testid="activity-tool-link">
      {tool}
    </Link>
  );
}

/** a tool's keys in a held state now, linked to that list */
function HeldCount({ tool, state, n }: { tool: string; state: "stuck" | "unknown"; n: number | null }) {
  if (n === null) return <span className="text-faint" title="the key store did not answer">—</span>;
  if (n === 0) return <span className="text-faint" data-testid={`held-${state}`}>0</span>;
  return (
    <Link href={`/keys?${new URLSearchParams({ tool, state })}`} className={clsx("font-medium hover:underline", state === "stuck" ? "text-warn" : "text-unknown")} data-testid={`held-${state}`}>
      {formatCount(n)}
    </Link>
  );
}

/** From md up: one row per tool, the last hour's calls and the keys held now. */
function ActivityTable({ activity }: { activity: ToolOverview[] }) {
  return (
    <div className="mt-3 hidden overflow-x-auto md:block">
      <table data-testid="activity-table" className="w-full text-[13px]">
        <thead>
          <tr className="border-t border-line text-xs text-muted">
            <th scope="col" rowSpan={2} className="border-b border-line px-5 py-2 text-left align-bottom font-medium">Tool</th>
            <th scope="colgroup" colSpan={4} className="px-3 pt-2 text-right font-medium text-faint">Calls, last hour</th>
            <th scope="colgroup" colSpan={2} className="px-5 pt-2 text-right font-medium text-faint">Keys held now</th>
          </tr>
          <tr className="border-b border-line text-xs text-muted">
            {[...CALLS, ...HELD].map(({ label }, i, all) => (
              <th key={label} scope="col" className={clsx("py-2 text-right font-medium whitespace-nowrap", i === all.length - 1 ? "px-5" : "px-3")}>
                {label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody className="divide-y divide-line">
          {activity.map((a) => (
            <tr key={a.tool} data-testid={`activity-${a.tool}`}>
              <td className="px-5 py-2">
                <ToolLink tool={a.tool} />
              </td>
              {CALLS.map((c) => (
                <td key={c.label} className={clsx("px-3 py-2 text-right tabular-nums", c.n(a) === 0 && "text-faint")} data-testid={"testId" in c ? c.testId : undefined}>
                  {formatCount(c.n(a))}
                </td>
              ))}
              {HELD.map((h, i) => (
                <td key={h.state} className={clsx("py-2 text-right tabular-nums", i === HELD.length - 1 ? "px-5" : "px-3")}>
                  <HeldCount tool={a.tool} state={h.state} n={a.held?.[h.state] ?? null} />
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Below md: one card per tool with the same numbers and links, so a phone never scrolls sideways. */
function ActivityCards({ activity }: { activity: ToolOverview[] }) {
  return (
    <ul className="mt-3 divide-y divide-line border-t border-line md:hidden" data-testid="activity-cards">
      {activity.map((a) => (
        <li key={a.tool} className="space-y-2 px-5 py-3 text-[13px]" data-testid={`activity-card-${a.tool}`}>
          <ToolLink tool={a.tool} className="break-all" />
          <div className="grid grid-cols-2 gap-x-4">
            <div>
              <p className="text-[11px] text-faint">Calls, last hour</p>
              <dl className="space-y-0.5">
              {CALLS.map((c) => (
                <div key={c.label} className="flex justify-between gap-2">
                  <dt className="text-muted">{c.label}</dt>
                  <dd className={clsx("tabular-nums", c.n(a) === 0 && "text-faint")} data-testid={"testId" in c ? c.testId : undefined}>
                    {formatCount(c.n(a))}
                  </dd>
                </div>
              ))}
              </dl>
            </div>
            <div>
              <p className="text-[11px] text-faint">Keys held now</p>
              <dl className="space-y-0.5">
              {HELD.map((h) => (
                <div key={h.state} className="flex justify-between gap-2">
                  <dt className="text-muted">{h.label}</dt>
                  <dd className="tabular-nums">
                    <HeldCount tool={a.tool} state={h.state} n={a.held?.[h.state] ?? null} />
                  </dd>
                </div>
              ))}
              </dl>
            </div>
          </div>
        </li>
      ))}
    </ul>
  );
}

/** The overview's per-tool figures: a table on wide screens, cards on narrow ones. */
export function ToolActivity({ activity }: { activity: ToolOverview[] }) {
  return (
    <>
      <ActivityTable activity={activity} />
      <ActivityCards activity={activity} />
    </>
  );
}
