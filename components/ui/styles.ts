import clsx from "clsx";

/** Shared class strings, so buttons and fields look the same on every page. */
export const inputClass =
  "rounded-md border border-line-strong bg-surface px-2.5 py-1.5 text-[13px] text-fg placeholder:text-faint focus:border-accent focus:outline-2 focus:outline-offset-0 focus:outline-accent/40 disabled:opacity-60";

export type ButtonVariant = "primary" | "secondary" | "danger" | "ghost";

export function buttonClass(variant: ButtonVariant = "secondary", size: "sm" | "md" = "md"): string {
  return clsx(
    "inline-flex items-center justify-center gap-1.5 rounded-md font-medium whitespace-nowrap transition-colors disabled:cursor-not-allowed disabled:opacity-50",
    size === "sm" ? "px-2 py-1 text-xs" : "px-3 py-1.5 text-[13px]",
    variant === "primary" && "bg-accent text-accent-fg hover:bg-accent/90",
    variant === "secondary" && "border border-line-strong bg-surface text-fg hover:bg-surface-2",
    variant === "danger" && "bg-bad text-white hover:bg-bad/90 dark:text-canvas",
    variant === "ghost" && "text-muted hover:bg-surface-2 hover:text-fg",
  );
}
