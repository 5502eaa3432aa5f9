import { HealthPill } from "@/components/health-pill";

export interface CardRow {
  label: string;
  value: React.ReactNode;
  mono?: boolean;
  testId?: string;
}

/** One dependency of the server (key store, audit database): what it is, where, and whether it answers. */
export function ComponentCard(props: {
  /** prefix of the data-testid attributes, e.g. "keystore" */
  id: string;
  title: string;
  kind: string;
  kindLabel: string;
  description: string;
  ok: boolean;
  rows: CardRow[];
  error?: { message: string; hint: string };
}) {
  const { id } = props;
  return (
    <section data-testid={`${id}-card`} className="flex flex-col rounded-xl border border-line bg-surface shadow-xs">
      <div className="flex items-start justify-between gap-4 px-5 pt-4">
        <div className="min-w-0">
          <h2 className="text-xs font-medium tracking-wide text-muted uppercase">{props.title}</h2>
          <p data-testid={`${id}-kind`} data-kind={props.kind} className="mt-1 text-base font-semibold tracking-tight">
            {props.kindLabel}
          </p>
        </div>
        <HealthPill ok={props.ok} testId={`${id}-status`} />
      </div>
      <p className="px-5 pt-1 text-[13px] text-muted">{props.description}</p>
      <dl className="mt-4 divide-y divide-line border-t border-line">
        {props.rows.map((row) => (
          <div key={row.label} className="grid grid-cols-[8rem_1fr] gap-4 px-5 py-2.5">
            <dt className="text-muted">{row.label}</dt>
            <dd data-testid={row.testId} className={row.mono ? "min-w-0 font-mono text-[12.5px] break-all" : "min-w-0"}>
              {row.value}
            </dd>
          </div>
        ))}
      </dl>
      {props.error && (
        <div data-testid={`${id}-error`} role="alert" className="mx-5 mb-5 rounded-lg border border-bad/30 bg-bad-soft px-3.5 py-3">
          <p className="font-mono text-[12.5px] break-words text-bad">{props.error.message}</p>
          <p className="mt-1.5 text-[13px] text-fg/80">{props.error.hint}</p>
        </div>
      )}
    </section>
  );
}
