import { buttonClass } from "@/components/ui/styles";

export function KeysEmpty({ filtered, gatewayExample, onClear }: { filtered: boolean; gatewayExample: string; onClear: () => void }) {
  if (filtered) {
    return (
      <div data-testid="keys-empty" className="rounded-xl border border-dashed border-line-strong px-6 py-10 text-center">
        <p className="font-medium">No keys match these filters.</p>
        <p className="mt-1 text-[13px] text-muted">Widen the filters, or clear them to see every key.</p>
        <button type="button" className={`${buttonClass("secondary")} mt-4`} onClick={onClear}>
          Clear filters
        </button>
      </div>
    );
  }
  return (
    <div data-testid="keys-empty" className="rounded-xl border border-dashed border-line-strong px-6 py-8">
      <p className="font-medium">No keys yet.</p>
      <p className="mt-1 text-[13px] text-muted">
        A key appears here when a write tool is called through the gateway with an <code className="font-mono text-[12px]">Idempotency-Key</code>. Try it with the API token from{" "}
        <code className="font-mono text-[12px]">.data/credentials.txt</code>:
      </p>
      <pre tabIndex={0} className="mt-3 overflow-x-auto rounded-lg bg-surface-2 px-4 py-3 font-mono text-[12px] leading-relaxed">{gatewayExample}</pre>
    </div>
  );
}
