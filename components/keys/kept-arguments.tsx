import { CopyButton } from "@/components/docs/copy-button";

/** What the console says of how arguments were kept (DESIGN.md § Arguments kept for operators). */
function howKept(kept: "redacted" | "full" | null, value: unknown): string {
  if (value === null || value === undefined) return "Not kept: this tool keeps only the arguments' fingerprint, or the audit retention has removed them.";
  if (kept === "full") return "As sent (this tool keeps its arguments in full).";
  return "As sent, with secret-looking fields (password, token, card number, CVC, IBAN…) and the fields the tool lists replaced by \"[redacted]\"; cut at 8 KiB.";
}

/** Keys sorted at every level: kept arguments are canonical JSON, which the database stores in its own order. */
export function sortedJson(value: unknown): string {
  return JSON.stringify(sorted(value), null, 2);
}

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.keys(value).sort().map((k) => [k, sorted((value as Record<string, unknown>)[k])]));
}

/** A call's arguments as its execution kept them: formatted JSON with a copy button, and how they were kept. */
export function KeptArguments({ value, kept, testId = "key-arguments" }: { value: unknown; kept: "redacted" | "full" | null; testId?: string }) {
  const present = value !== null && value !== undefined;
  const text = present ? sortedJson(value) : "";
  return (
    <div data-testid={testId} data-kept={present ? (kept ?? "redacted") : "none"}>
      <div className="flex items-start justify-between gap-3">
        <p className="text-xs text-muted">{howKept(kept, value)}</p>
        {present && <CopyButton text={text} label="Copy JSON" />}
      </div>
      {present && (
        <pre tabIndex={0} data-testid={`${testId}-json`} className="mt-2 max-h-96 overflow-auto rounded-lg bg-surface-2 px-4 py-3 font-mono text-[12px] leading-relaxed">
          {text}
        </pre>
      )}
    </div>
  );
}
