import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  analyzeGaps,
  DEFAULT_FRESH_KEY_WINDOW_MS,
  gapHistogram,
  MAX_FRESH_KEY_WINDOW_MS,
  MIN_FRESH_KEY_WINDOW_MS,
  MIN_SAMPLES,
  MIN_STALE_THRESHOLD_MS,
  retryWindow,
} from "./retry-gaps";

describe("retry gap analysis", () => {
  it("splits retries from genuine repeats and suggests a TTL between them", () => {
    const retries = Array.from({ length: 200 }, (_, i) => 200 + (i % 50) * 60); // 0.2 s – 3.1 s
    const repeats = [40 * 60_000, 55 * 60_000, 3 * 3_600_000]; // 40 min and later
    const a = analyzeGaps([...retries, ...repeats]);
    expect(a.retryClusterMaxMs).toBe(3_140);
    expect(a.firstRepeatGapMs).toBe(40 * 60_000);
    expect(a.repeats).toBe(3);
    expect(a.staleThresholdMs).toBeGreaterThan(3_140);
    expect(a.staleThresholdMs).toBeLessThan(40 * 60_000);
    expect(a.suggestedTtlMs).toBeGreaterThanOrEqual(3_140);
    expect(a.suggestedTtlMs).toBeLessThan(40 * 60_000);
    expect(a.reasoning).toMatch(/new actions/);
  });

  it("keeps one cluster when gaps spread evenly, flagging only far outliers", () => {
    const gaps = Array.from({ length: 100 }, (_, i) => 500 + i * 40);
    const a = analyzeGaps(gaps);
    expect(a.firstRepeatGapMs).toBeNull();
    expect(a.repeats).toBe(0);
    expect(a.staleThresholdMs).toBeGreaterThanOrEqual(MIN_STALE_THRESHOLD_MS);
  });

  it("never flags below a minute and suggests nothing from a handful of samples", () => {
    const a = analyzeGaps([10, 20, 30]);
    expect(a.staleThresholdMs).toBe(MIN_STALE_THRESHOLD_MS);
    expect(a.suggestedTtlMs).toBeNull();
    expect(analyzeGaps([]).samples).toBe(0);
  });

  it("always puts the threshold above every retry and the suggestion below the first repeat", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 5_000 }), { minLength: 20, maxLength: 300 }),
        fc.array(fc.integer({ min: 10 * 60_000, max: 86_400_000 }), { maxLength: 20 }),
        (retries, repeats) => {
          const a = analyzeGaps([...retries, ...repeats]);
          expect(a.staleThresholdMs).toBeGreaterThanOrEqual(Math.max(...retries));
          if (a.firstRepeatGapMs !== null && a.suggestedTtlMs !== null) expect(a.suggestedTtlMs).toBeLessThan(a.firstRepeatGapMs);
        },
      ),
    );
  });

  it("counts every gap into one histogram bucket", () => {
    const h = gapHistogram([50, 100, 101, 7_200_000, 10 ** 12]);
    expect(h.reduce((s, b) => s + b.count, 0)).toBe(5);
    expect(h[0]).toEqual({ upToMs: 100, count: 2 });
    expect(h[h.length - 1].count).toBe(1);
  });

  describe("the retry window of fresh-key duplicates", () => {
    it("is the documented default while a tool has too few replays", () => {
      expect(retryWindow(analyzeGaps([]))).toEqual({ windowMs: DEFAULT_FRESH_KEY_WINDOW_MS, source: "default", samples: 0 });
      const few = Array.from({ length: MIN_SAMPLES - 1 }, () => 300);
      expect(retryWindow(analyzeGaps(few))).toEqual({ windowMs: 60_000, source: "default", samples: MIN_SAMPLES - 1 });
    });

    it("covers the tool's retry cluster and stops below its genuine repeats", () => {
      // retries up to 25 s (slow callers), genuine repeats from 40 min on
      const retries = Array.from({ length: 200 }, (_, i) => 1_000 + i * 120);
      const w = retryWindow(analyzeGaps([...retries, 40 * 60_000, 50 * 60_000]));
      expect(w.source).toBe("retry_gaps");
      expect(w.samples).toBe(202);
      expect(w.windowMs).toBeGreaterThanOrEqual(Math.max(...retries));
      expect(w.windowMs).toBeLessThan(40 * 60_000);
    });

    it("is never narrower than a plausible retry, nor wider than its maximum", () => {
      const quick = Array.from({ length: 50 }, (_, i) => 100 + i);
      expect(retryWindow(analyzeGaps(quick)).windowMs).toBe(MIN_FRESH_KEY_WINDOW_MS);
      const slow = Array.from({ length: 50 }, (_, i) => 20 * 60_000 + i * 1_000);
      expect(retryWindow(analyzeGaps(slow)).windowMs).toBe(MAX_FRESH_KEY_WINDOW_MS);
    });

    it("stays below the first genuine repeat even when that is closer than the minimum", () => {
      const a = analyzeGaps([...Array.from({ length: 40 }, () => 200), 5_000, 6_000]);
      expect(a.firstRepeatGapMs).toBe(5_000);
      expect(retryWindow(a).windowMs).toBeLessThan(5_000);
    });
  });
});
