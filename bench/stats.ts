/** Small statistics for benchmarks: medians over repeated rounds, ratios to a baseline, one Markdown table. */
export function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

export const median = (values: number[]) => quantile(values, 0.5);

/** Times `fn` `n` times in sequence; returns each latency in microseconds. */
export async function timeSequential(n: number, fn: (i: number) => Promise<unknown>): Promise<number[]> {
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await fn(i);
    out[i] = Number(process.hrtime.bigint() - t0) / 1_000;
  }
  return out;
}

/** One round of a load test: throughput and latency quantiles (milliseconds). */
export interface LoadRound {
  throughput: number;
  p50: number;
  p99: number;
}

/**
 * `total` calls of `fn`, at most `concurrency` in flight at once (callers in one process, each
 * starting its next call when its last one ends). Latencies in milliseconds.
 */
export async function timeConcurrent(total: number, concurrency: number, fn: (i: number) => Promise<unknown>): Promise<LoadRound> {
  const latencies = new Array<number>(total);
  let next = 0;
  const t0 = performance.now();
  const caller = async () => {
    for (let i = next++; i < total; i = next++) {
      const s = performance.now();
      await fn(i);
      latencies[i] = performance.now() - s;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, caller));
  const elapsedMs = performance.now() - t0;
  return { throughput: (total / elapsedMs) * 1_000, p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99) };
}

/** The median of each figure over rounds. */
export function medianRound(rounds: LoadRound[]): LoadRound {
  return {
    throughput: median(rounds.map((r) => r.throughput)),
    p50: median(rounds.map((r) => r.p50)),
    p99: median(rounds.map((r) => r.p99)),
  };
}

export interface Row {
  /** which part of the benchmark (engine, peers, gateway, console …) */
  section?: string;
  name: string;
  /** NaN when it could not be measured; `note` then says why */
  value: number;
  unit: string;
  /** latency quantiles in ms, for load and query rows */
  p50?: number;
  tail?: { label: string; ms: number };
  baseline?: string;
  ratio?: number;
  target?: string;
  note?: string;
}

function formatValue(value: number, unit: string): string {
  if (!Number.isFinite(value)) return "n/a";
  if (unit === "µs") return `${value.toFixed(0)} µs`;
  if (unit === "ms") return `${value < 10 ? value.toFixed(2) : value.toFixed(1)} ms`;
  if (unit === "B") return `${value.toFixed(0)} B`;
  return `${value < 10 ? value.toFixed(2) : Math.round(value).toLocaleString("en-US")} ${unit}`;
}

const ms = (v: number | undefined) => (v === undefined || !Number.isFinite(v) ? "" : `${v < 10 ? v.toFixed(2) : v.toFixed(1)} ms`);

/** One Markdown table for every row; ratios are against a baseline measured in the same run. */
export function printTable(title: string, rows: Row[]): void {
  console.log(`\n## ${title}\n`);
  console.log("| section | measurement | median | p50 | tail | baseline | ratio | target | note |");
  console.log("|---|---|---:|---:|---:|---|---:|---|---|");
  for (const r of rows) {
    const tail = r.tail && Number.isFinite(r.tail.ms) ? `${r.tail.label} ${ms(r.tail.ms)}` : "";
    const ratio = r.ratio === undefined || !Number.isFinite(r.ratio) ? "" : `${r.ratio.toFixed(2)}×`;
    const cells = [r.section ?? "", r.name, formatValue(r.value, r.unit), ms(r.p50), tail, r.baseline ?? "", ratio, r.target ?? "", r.note ?? ""];
    console.log(`| ${cells.map((c) => c.replace(/\|/g, "\\|")).join(" | ")} |`);
  }
}
