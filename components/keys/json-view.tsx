/** Pretty-printed JSON, scrolling rather than stretching the page. */
export function JsonView({ value, testId }: { value: unknown; testId?: string }) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  return (
    <pre tabIndex={0} data-testid={testId} className="mt-2 max-h-96 overflow-auto rounded-lg bg-surface-2 px-4 py-3 font-mono text-[12px] leading-relaxed">
      {text}
    </pre>
  );
}
