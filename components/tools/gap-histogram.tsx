"use client";

import { Bar, BarChart, CartesianGrid, Cell, ReferenceLine, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { AXIS_TICK, GRID_STROKE } from "./chart-theme";

export interface GapBucket {
  upToMs: number;
  count: number;
}

/** 100 ms, 2.5 s, 5 min, 6 h, 1 d: short enough for an axis */
function short(ms: number): string {
  if (!Number.isFinite(ms)) return "∞";
  if (ms < 1_000) return `${ms}ms`;
  if (ms < 60_000) return `${ms / 1_000}s`;
  if (ms < 3_600_000) return `${ms / 60_000}m`;
  if (ms < 86_400_000) return `${ms / 3_600_000}h`;
  return `${ms / 86_400_000}d`;
}

/**
 * Bucket i spans [i, i + 1] on the x axis; a marker's position inside its bucket is interpolated on
 * a log scale, so the suggested TTL and the stale threshold land where they belong, not at a bar's middle.
 */
function position(valueMs: number, bounds: number[]): number {
  for (let i = 0; i < bounds.length; i++) {
    const hi = bounds[i];
    if (valueMs > hi) continue;
    const lo = i === 0 ? hi / 4 : bounds[i - 1];
    const top = Number.isFinite(hi) ? hi : lo * 4;
    const f = (Math.log(Math.max(valueMs, lo)) - Math.log(lo)) / (Math.log(top) - Math.log(lo));
    return i + Math.min(1, Math.max(0, f));
  }
  return bounds.length;
}

export function GapHistogram({
  histogram,
  suggestedTtlMs,
  staleThresholdMs,
  labels,
}: {
  histogram: GapBucket[];
  suggestedTtlMs: number | null;
  staleThresholdMs: number;
  /** formatted values for the markers' labels */
  labels: { ttl: string | null; stale: string };
}) {
  // Infinity does not survive the trip from the server component as a number
  const bounds = histogram.map((b) => (b.upToMs === null || !Number.isFinite(b.upToMs) ? Infinity : b.upToMs));
  const data = histogram.map((b, i) => ({
    x: i + 0.5,
    count: b.count,
    range: `${i === 0 ? "≤ " : `${short(bounds[i - 1])} – `}${i === 0 ? short(bounds[0]) : short(bounds[i])}`,
    beyondStale: (i === 0 ? 0 : bounds[i - 1]) >= staleThresholdMs,
  }));
  const ticks = Array.from({ length: bounds.length + 1 }, (_, i) => i);
  const tickLabel = (i: number) => (i === 0 ? "0" : short(bounds[i - 1]));

  return (
    <div data-testid="gap-histogram">
      {/* the markers' names sit above the chart, side by side: two markers close together never put one label over the other */}
      <ul className="mb-1 flex flex-wrap gap-x-4 gap-y-1 px-1 text-[11px]" data-testid="gap-markers">
        {suggestedTtlMs !== null && labels.ttl && (
          <li className="flex items-center gap-1.5 text-ok" data-testid="marker-ttl">
            <span aria-hidden="true" className="w-4 border-t-[1.5px] border-dashed border-ok" />
            suggested TTL {labels.ttl}
          </li>
        )}
        <li className="flex items-center gap-1.5 text-warn" data-testid="marker-stale">
          <span aria-hidden="true" className="w-4 border-t-[1.5px] border-dashed border-warn" />
          stale after {labels.stale}
        </li>
      </ul>
      <ResponsiveContainer width="100%" height={210} initialDimension={{ width: 600, height: 210 }}>
        <BarChart data={data} margin={{ top: 8, right: 12, bottom: 0, left: -12 }} barCategoryGap={2}>
          <CartesianGrid vertical={false} stroke={GRID_STROKE} />
          <XAxis
            dataKey="x"
            type="number"
            domain={[0, bounds.length]}
            ticks={ticks}
            // on a narrow chart every other bound is dropped rather than printed over its neighbour
            interval="preserveStartEnd"
            minTickGap={4}
            tickFormatter={tickLabel}
            tick={AXIS_TICK}
            tickLine={false}
            axisLine={{ stroke: GRID_STROKE }}
          />
          <YAxis allowDecimals={false} tick={AXIS_TICK} tickLine={false} axisLine={false} width={44} />
          <Tooltip
            cursor={{ fill: "var(--surface-2)" }}
            content={({ active, payload }) => {
              const d = (payload?.[0] as { payload?: (typeof data)[number] } | undefined)?.payload;
              if (!active || !d) return null;
              return (
                <div className="rounded-lg border border-line bg-surface px-3 py-2 text-xs shadow-lg">
                  <p className="font-medium text-fg">{d.range}</p>
                  <p className="text-muted tabular-nums">
                    {d.count} replay{d.count === 1 ? "" : "s"}
                  </p>
                </div>
              );
            }}
          />
          <Bar dataKey="count" isAnimationActive={false} radius={[2, 2, 0, 0]}>
            {data.map((d) => (
              <Cell key={d.x} fill={d.beyondStale ? "var(--warn)" : "var(--accent)"} />
            ))}
          </Bar>
          {suggestedTtlMs !== null && labels.ttl && (
            <ReferenceLine
              x={position(suggestedTtlMs, bounds)}
              stroke="var(--ok)"
              strokeWidth={1.5}
              strokeDasharray="4 3"
            />
          )}
          <ReferenceLine
            x={position(staleThresholdMs, bounds)}
            stroke="var(--warn)"
            strokeWidth={1.5}
            strokeDasharray="4 3"
          />
        </BarChart>
      </ResponsiveContainer>
    </div>
  );
}
