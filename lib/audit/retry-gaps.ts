/**
 * Retry gaps: the time from an original execution's start to a duplicate's arrival.
 *
 * Real retries come from callers' timeouts and backoff, so their gaps cluster within seconds. A
 * genuinely new action that collides with an old key (a key reused per conversation, an identical
 * keyless call through fallback dedupe) arrives much later: a second cluster, often orders of
 * magnitude away. On a log scale the two are separated by the widest empty stretch between
 * consecutive gaps, which is where the split goes — when that stretch is wide enough to be a real
 * separation (a factor of SPLIT_RATIO) rather than noise in one cluster.
 *
 * From the split:
 * - the stale-suppression threshold: a replay whose gap exceeds it is flagged;
 * - the suggested fallback-dedupe TTL: above the retry cluster's p99.9 with a margin, and below the
 *   first gap that looks like a genuine repeat.
 */

/** Two clusters must be at least this factor apart to count as two. */
export const SPLIT_RATIO = 8;
/** With no second cluster in sight, a replay later than this many times the cluster's p99 is flagged. */
export const OUTLIER_FACTOR = 10;
/** Below this no replay is flagged, whatever the distribution: a minute is always a plausible retry. */
export const MIN_STALE_THRESHOLD_MS = 60_000;
/** Until a tool has this many replays, its own distribution says too little; the floor applies. */
export const MIN_SAMPLES = 20;
export const TTL_MARGIN = 2;

export interface GapAnalysis {
  samples: number;
  p50Ms: number | null;
  p99Ms: number | null;
  p999Ms: number | null;
  /** the largest gap of the retry cluster */
  retryClusterMaxMs: number | null;
  /** the first gap beyond the split, if there is a second cluster */
  firstRepeatGapMs: number | null;
  /** how many gaps lie beyond the split */
  repeats: number;
  staleThresholdMs: number;
  /** null when there is too little data to suggest anything */
  suggestedTtlMs: number | null;
  /** one sentence an operator can check against the histogram */
  reasoning: string;
}

/** Distinct gaps in ascending order, each with how many replays had it. */
export interface GapRun {
  gapMs: number;
  count: number;
}

/** The value at rank ceil(q·n) − 1 of the first `n` gaps of `runs`. */
function quantile(runs: readonly GapRun[], n: number, q: number): number {
  if (n === 0) return NaN;
  const rank = Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1));
  let seen = 0;
  for (const run of runs) {
    seen += run.count;
    if (rank < seen) return run.gapMs;
  }
  return runs[runs.length - 1].gapMs;
}

export function analyzeGaps(gapsMs: readonly number[]): GapAnalysis {
  const sorted = gapsMs.filter((g) => Number.isFinite(g) && g >= 0).sort((a, b) => a - b);
  const runs: GapRun[] = [];
  for (const g of sorted) {
    const last = runs[runs.length - 1];
    if (last && last.gapMs === g) last.count++;
    else runs.push({ gapMs: g, count: 1 });
  }
  return analyzeGapRuns(runs);
}

/**
 * analyzeGaps over gaps given as runs (ascending, distinct, counts > 0): the same answer as over
 * the gaps themselves, for gaps summed from histograms (the tool-stats rollups) without listing them.
 */
export function analyzeGapRuns(runs: readonly GapRun[]): GapAnalysis {
  const n = runs.reduce((sum, r) => sum + r.count, 0);
  if (n === 0) {
    return {
      samples: 0,
      p50Ms: null,
      p99Ms: null,
      p999Ms: null,
      retryClusterMaxMs: null,
      firstRepeatGapMs: null,
      repeats: 0,
      staleThresholdMs: MIN_STALE_THRESHOLD_MS,
      suggestedTtlMs: null,
      reasoning: "no duplicates recorded yet",
    };
  }

  // Widest stretch on a log scale between consecutive gaps (1 ms floor so zero gaps compare).
  let splitAt = -1;
  let widest = 1;
  for (let i = 0; i + 1 < runs.length; i++) {
    const ratio = Math.max(1, runs[i + 1].gapMs) / Math.max(1, runs[i].gapMs);
    if (ratio > widest) {
      widest = ratio;
      splitAt = i;
    }
  }
  const twoClusters = widest >= SPLIT_RATIO && splitAt >= 0;
  const retry = twoClusters ? runs.slice(0, splitAt + 1) : runs;
  const retryCount = retry.reduce((sum, r) => sum + r.count, 0);
  const retryMax = retry[retry.length - 1].gapMs;
  const p99 = quantile(retry, retryCount, 0.99);
  const p999 = quantile(retry, retryCount, 0.999);
  const firstRepeat = twoClusters ? runs[splitAt + 1].gapMs : null;

  let threshold: number;
  let reasoning: string;
  if (twoClusters && firstRepeat !== null) {
    // geometric midpoint of the empty stretch
    threshold = Math.max(MIN_STALE_THRESHOLD_MS, Math.round(Math.sqrt(Math.max(1, retryMax) * firstRepeat)));
    reasoning =
      `${retryCount} duplicates arrived within ${fmt(retryMax)} (retries); ${n - retryCount} arrived after ${fmt(firstRepeat)} or later, ` +
      `a ${Math.round(widest)}× jump: those look like new actions`;
  } else {
    threshold = Math.max(MIN_STALE_THRESHOLD_MS, Math.round(p99 * OUTLIER_FACTOR));
    reasoning = `${n === 1 ? "the one duplicate forms" : `all ${n} duplicates form`} one cluster up to ${fmt(retryMax)}; a replay later than ${OUTLIER_FACTOR}× its p99 would be flagged`;
  }

  let suggested: number | null = null;
  if (n >= MIN_SAMPLES) {
    suggested = Math.max(1_000, Math.round(p999 * TTL_MARGIN));
    // never as long as the first genuine repeat: that is the action the TTL must not swallow
    if (firstRepeat !== null && suggested >= firstRepeat) suggested = Math.floor(Math.sqrt(Math.max(1, retryMax) * firstRepeat));
  } else {
    reasoning += `; fewer than ${MIN_SAMPLES} duplicates, so no TTL is suggested yet`;
  }

  return {
    samples: n,
    p50Ms: quantile(runs, n, 0.5),
    p99Ms: p99,
    p999Ms: p999,
    retryClusterMaxMs: retryMax,
    firstRepeatGapMs: firstRepeat,
    repeats: twoClusters ? n - retryCount : 0,
    staleThresholdMs: threshold,
    suggestedTtlMs: suggested,
    reasoning,
  };
}

/**
 * The retry window of fresh-key duplicates: identical calls (same tool, scope and arguments) under
 * different keys whose starts lie this close together are a retry under a fresh key, not a new
 * action. Learnt from one scope's replays of the tool (the reconciler's analyses are per tool and
 * scope). While they are fewer than MIN_SAMPLES, DEFAULT_FRESH_KEY_WINDOW_MS (a minute,
 * like the default fallback-dedupe TTL). With enough replays, the tool's own retries decide: the
 * upper bound of the retry cluster or the suggested TTL above it (its p99.9 with a margin),
 * whichever is larger, kept within MIN_/MAX_FRESH_KEY_WINDOW_MS and below the first gap that
 * looks like a genuine repeat.
 */
export const DEFAULT_FRESH_KEY_WINDOW_MS = 60_000;
/** Identical calls this close are always a plausible retry, whatever a tool's replays say. */
export const MIN_FRESH_KEY_WINDOW_MS = 10_000;
export const MAX_FRESH_KEY_WINDOW_MS = 10 * 60_000;

export interface RetryWindow {
  windowMs: number;
  /** retry_gaps: from the tool's replays; default: too few replays yet */
  source: "retry_gaps" | "default";
  samples: number;
}

export function retryWindow(analysis: GapAnalysis): RetryWindow {
  if (analysis.samples < MIN_SAMPLES || analysis.retryClusterMaxMs === null) {
    return { windowMs: DEFAULT_FRESH_KEY_WINDOW_MS, source: "default", samples: analysis.samples };
  }
  let windowMs = Math.max(analysis.retryClusterMaxMs, analysis.suggestedTtlMs ?? 0);
  windowMs = Math.min(MAX_FRESH_KEY_WINDOW_MS, Math.max(MIN_FRESH_KEY_WINDOW_MS, windowMs));
  // identical calls as far apart as the tool's genuine repeats are new actions
  if (analysis.firstRepeatGapMs !== null) windowMs = Math.min(windowMs, Math.max(1, analysis.firstRepeatGapMs - 1));
  return { windowMs, source: "retry_gaps", samples: analysis.samples };
}

/** Log-scale histogram buckets for the console: upper bounds in ms. */
export const GAP_BUCKETS_MS = [100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000, 21_600_000, 86_400_000, Infinity];

export function gapHistogram(gapsMs: readonly number[]): { upToMs: number; count: number }[] {
  const counts = GAP_BUCKETS_MS.map((upToMs) => ({ upToMs, count: 0 }));
  for (const g of gapsMs) {
    const i = GAP_BUCKETS_MS.findIndex((b) => g <= b);
    counts[i].count++;
  }
  return counts;
}

export function fmt(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  if (ms < 3_600_000) return `${(ms / 60_000).toFixed(ms < 600_000 ? 1 : 0)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}
