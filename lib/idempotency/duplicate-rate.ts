/** Calls the average covers, about. */
const WINDOW = 16;
/** tools tracked at most (names come from the registry and from guarded MCP servers) */
const MAX_TOOLS = 10_000;

/**
 * Per tool, the share of the recent calls that reached the key store and found a done record to
 * replay: an exponential moving average over about the last 16 such calls. Above one half,
 * reading a key before reserving it (KeyStore.peekReplay: one GET on Redis, against a begin script
 * that costs the store about twice a GET) costs less on average than reserving it at once: a
 * replay then costs the read alone, a new key the read and the reservation.
 */
export class DuplicateRate {
  private readonly rates = new Map<string, number>();

  observe(tool: string, replay: boolean): void {
    const rate = this.rates.get(tool);
    if (rate === undefined && this.rates.size >= MAX_TOOLS) this.rates.clear();
    const before = rate ?? 0;
    this.rates.set(tool, before + ((replay ? 1 : 0) - before) / WINDOW);
  }

  mostlyDuplicates(tool: string): boolean {
    return (this.rates.get(tool) ?? 0) > 0.5;
  }
}
