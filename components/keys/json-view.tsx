import { CopyButton } from "@/components/docs/copy-button";

/** Pretty-printed JSON, scrolling rather than stretching the page, with a copy button over it. */
export function JsonView({ value, testId }: { value: unknown; testId?: string }) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  return (
    <div className="relative mt-2">
      <pre tabIndex={0} data-testid={testId} className="max-h-96 overflow-auto rounded-lg bg-surface-2 px-4 py-3 pr-16 font-mono text-[12px] leading-relaxed">
        {text}
      </pre>
      <span className="absolute top-1.5 right-2">
        <CopyButton text={text} label="Copy" testId="copy-json" />
      </span>
    </div>
  );
}
