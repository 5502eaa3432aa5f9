/** Display helpers shared by server and client components; times in, text out. */

const UNITS: [limitMs: number, unitMs: number, name: string][] = [
  [60_000, 1_000, "s"],
  [3_600_000, 60_000, "min"],
  [86_400_000, 3_600_000, "h"],
  [Infinity, 86_400_000, "d"],
];

/** 850 ms, 4.2 s, 12 min, 3 h, 2 d */
export function formatDuration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1_000) return `${Math.round(ms)} ms`;
  if (abs < 10_000) return `${(ms / 1_000).toFixed(1)} s`;
  for (const [limit, unit, name] of UNITS) {
    if (abs < limit) return `${Math.round(ms / unit)} ${name}`;
  }
  return `${Math.round(ms / 86_400_000)} d`;
}

/** "3 min ago" / "in 45 s" relative to `nowMs` */
export function formatRelative(at: string | Date | null, nowMs: number): string {
  if (at === null) return "—";
  const ms = new Date(at).getTime() - nowMs;
  if (Math.abs(ms) < 1_000) return "now";
  return ms < 0 ? `${formatDuration(-ms)} ago` : `in ${formatDuration(ms)}`;
}

/** 2025-01-31 14:03:09 UTC — unambiguous for operators in different time zones */
export function formatTimestamp(at: string | Date | null): string {
  if (at === null) return "—";
  const iso = new Date(at).toISOString();
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
}

export function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}

/**
 * What a tool's executions in a window did, by what is known of them: "3 ran", "2 calls ended
 * unknown", "1 ran · 1 not run". A call whose outcome is unknown (or still running) is not said to
 * have run. `outcomes` counts the executions by outcome (those still running count as unknown).
 */
export function executionsNote(executions: number, outcomes: Record<"succeeded" | "failed" | "final_error" | "late_completion" | "released" | "unknown", number>): string {
  if (executions === 0) return "no calls ran";
  const parts: [number, string][] = [
    [outcomes.succeeded + outcomes.final_error + outcomes.late_completion, "ran"],
    [outcomes.failed, "not run (the tool said so)"],
    [outcomes.released, "released"],
    [outcomes.unknown, "ended unknown"],
  ];
  const known = parts.filter(([n]) => n > 0);
  if (known.length === 1) return `${formatCount(known[0][0])} ${known[0][0] === 1 ? "call" : "calls"} ${known[0][1]}`;
  return known.map(([n, what]) => `${formatCount(n)} ${what}`).join(" · ");
}
