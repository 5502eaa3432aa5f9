/** Series colours: the console's semantic palette, so light and dark mode follow the system. */
export const SERIES = {
  executions: { label: "Executions", color: "var(--accent)" },
  replay: { label: "Replays", color: "var(--ok)" },
  fresh_key: { label: "Fresh-key duplicates", color: "oklch(0.66 0.11 195)" },
  conflict: { label: "Conflicts (in flight)", color: "var(--warn)" },
  stuck: { label: "Stuck", color: "var(--bad)" },
  unknown: { label: "Unknown outcome", color: "oklch(0.5 0.12 45)" },
  mismatch: { label: "Mismatches", color: "oklch(0.62 0.16 320)" },
  fallback: { label: "via fallback key", color: "var(--fg)" },
} as const;

export type SeriesKey = keyof typeof SERIES;

export const AXIS_TICK = { fill: "var(--muted)", fontSize: 11 } as const;
export const GRID_STROKE = "var(--line)";
