/** A panel of the tool page: a titled card, with a note on the right of its title. */
export function Card({ title, aside, children, testId }: { title: string; aside?: string; children: React.ReactNode; testId?: string }) {
  return (
    <section data-testid={testId} className="min-w-0 overflow-hidden rounded-xl border border-line bg-surface shadow-xs">
      <div className="flex flex-wrap items-baseline justify-between gap-2 border-b border-line px-5 py-3">
        <h2 className="text-xs font-medium tracking-wide text-muted uppercase">{title}</h2>
        {aside && <span className="font-mono text-[11.5px] text-faint">{aside}</span>}
      </div>
      {children}
    </section>
  );
}
