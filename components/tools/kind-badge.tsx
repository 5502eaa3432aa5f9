import clsx from "clsx";

/** read tools are never gated; write tools go through the idempotency engine */
export function KindBadge({ kind }: { kind: "read" | "write" }) {
  return (
    <span
      data-kind={kind}
      className={clsx(
        "inline-flex items-center rounded-full px-2 py-0.5 text-[11px] font-medium",
        kind === "write" ? "bg-accent-soft text-accent" : "bg-surface-2 text-muted",
      )}
    >
      {kind}
    </span>
  );
}

/** How a tool treats the Idempotency-Key header. */
export function KeyBadge({ mode }: { mode: "required" | "optional" | "unused" }) {
  const label = mode === "required" ? "key required" : mode === "optional" ? "key optional · fallback dedupe" : "no key";
  return (
    <span
      data-key-mode={mode}
      className={clsx(
        "inline-flex items-center rounded-full px-2 py-0.5 text-[11px] font-medium",
        mode === "optional" ? "bg-warn-soft text-warn" : "bg-surface-2 text-muted",
      )}
    >
      {label}
    </span>
  );
}
