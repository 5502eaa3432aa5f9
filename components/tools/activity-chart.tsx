"use client";

import { Bar, CartesianGrid, ComposedChart, Line, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import type { StatsBucket, SuppressionKind } from "@/lib/audit/tool-stats";
import { AXIS_TICK, GRID_STROKE, SERIES, type SeriesKey } from "./chart-theme";

/** every suppression kind the buckets count, so the bar's height is every call that reached the engine */
const SUPPRESSED = ["replay", "fresh_key", "conflict", "stuck", "unknown", "mismatch"] as const satisfies readonly (SeriesKey & SuppressionKind)[];
const STACK: SeriesKey[] = ["executions", ...SUPPRESSED];
const HOUR = 3_600_000;

function tickFormatter(bucketMs: number) {
  return (ms: number) => {
    const iso = new Date(ms).toISOString();
    // a week in 4 h buckets reads by day; shorter windows by clock time (UTC, like every time here)
    if (bucketMs >= 4 * HOUR) return iso.slice(11, 13) === "00" ? iso.slice(5, 10) : iso.slice(11, 16);
    return iso.slice(11, 16);
  };
}

function bucketLabel(startMs: number, bucketMs: number): string {
  const from = new Date(startMs).toISOString();
  const to = new Date(startMs + bucketMs).toISOString();
  return `${from.slice(0, 10)} ${from.slice(11, 16)}–${to.slice(11, 16)} UTC`;
}

interface TooltipEntry {
  dataKey?: unknown;
  value?: unknown;
}

function ChartTooltip({ active, payload, bucketMs }: { active?: boolean; payload?: readonly TooltipEntry[]; bucketMs: number }) {
  if (!active || !payload?.length) return null;
  const bucket = (payload[0] as { payload?: StatsBucket }).payload;
  if (!bucket) return null;
  const suppressed = SUPPRESSED.reduce((sum, kind) => sum + bucket[kind], 0);
  return (
    <div className="rounded-lg border border-line bg-surface px-3 py-2 text-xs shadow-lg">
      <p className="mb-1.5 font-medium text-fg">{bucketLabel(bucket.startMs, bucketMs)}</p>
      <table className="tabular-nums">
        <tbody>
          {[...STACK, "fallback" as const].map((key) => (
            <tr key={key}>
              <td className="pr-2">
                <span aria-hidden="true" className="inline-block size-2 rounded-sm" style={{ background: SERIES[key].color }} />
              </td>
              <td className="pr-4 text-muted">{SERIES[key].label}</td>
              <td className="text-right text-fg">{bucket[key]}</td>
            </tr>
          ))}
          <tr>
            <td />
            <td className="pt-1 pr-4 text-muted">Suppressed share</td>
            <td className="pt-1 text-right text-fg">
              {bucket.executions + suppressed === 0 ? "—" : `${Math.round((100 * suppressed) / (bucket.executions + suppressed))}%`}
            </td>
          </tr>
        </tbody>
      </table>
    </div>
  );
}

/** Executions and suppressions by kind per bucket, stacked: the bar's height is every call that reached the engine. */
export function ActivityChart({ buckets, bucketMs }: { buckets: StatsBucket[]; bucketMs: number }) {
  return (
    <div data-testid="activity-chart">
      <ul className="mb-3 flex flex-wrap gap-x-4 gap-y-1 text-xs text-muted">
        {[...STACK, "fallback" as const].map((key) => (
          <li key={key} className="flex items-center gap-1.5" data-series={key}>
            {key === "fallback" ? (
              <span aria-hidden="true" className="inline-block h-0 w-3 border-t-2 border-dashed" style={{ borderColor: SERIES[key].color }} />
            ) : (
              <span aria-hidden="true" className="inline-block size-2.5 rounded-sm" style={{ background: SERIES[key].color }} />
            )}
            {SERIES[key].label}
          </li>
        ))}
      </ul>
      <ResponsiveContainer width="100%" height={240} initialDimension={{ width: 800, height: 240 }}>
        <ComposedChart data={buckets} margin={{ top: 4, right: 4, bottom: 0, left: -12 }} barCategoryGap={1}>
          <CartesianGrid vertical={false} stroke={GRID_STROKE} />
          <XAxis
            dataKey="startMs"
            tickFormatter={tickFormatter(bucketMs)}
            tick={AXIS_TICK}
            tickLine={false}
            axisLine={{ stroke: GRID_STROKE }}
            minTickGap={24}
          />
          <YAxis allowDecimals={false} tick={AXIS_TICK} tickLine={false} axisLine={false} width={44} />
          <Tooltip cursor={{ fill: "var(--surface-2)" }} content={(props) => <ChartTooltip active={props.active} payload={props.payload} bucketMs={bucketMs} />} />
          {STACK.map((key) => (
            <Bar key={key} dataKey={key} name={SERIES[key].label} stackId="calls" fill={SERIES[key].color} className={`series-${key}`} isAnimationActive={false} />
          ))}
          <Line dataKey="fallback" type="monotone" stroke={SERIES.fallback.color} strokeOpacity={0.6} strokeDasharray="4 3" strokeWidth={1.5} dot={false} isAnimationActive={false} />
        </ComposedChart>
      </ResponsiveContainer>
    </div>
  );
}
