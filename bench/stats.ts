/** Small statistics for benchmarks: medians over repeated rounds, ratios to a baseline. */
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

export interface Row {
  name: string;
  value: number;
  unit: string;
  baseline?: string;
  ratio?: number;
  target?: string;
}

export function printTable(title: string, rows: Row[]): void {
  console.log(`\n## ${title}\n`);
  console.log("| measurement | median | baseline | ratio | target |");
  console.log("|---|---:|---|---:|---|");
  for (const r of rows) {
    const value = r.unit === "µs" ? `${r.value.toFixed(0)} µs` : `${r.value.toFixed(r.value < 10 ? 2 : 0)} ${r.unit}`;
    console.log(`| ${r.name} | ${value} | ${r.baseline ?? ""} | ${r.ratio === undefined ? "" : r.ratio.toFixed(2) + "×"} | ${r.target ?? ""} |`);
  }
}
