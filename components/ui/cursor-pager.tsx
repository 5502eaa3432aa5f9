import { buttonClass } from "./styles";

/** Previous/Next over a stack of cursors, with the page number and what the page holds. */
export function CursorPager(props: {
  page: number;
  /** e.g. "50 keys"; omitted on an empty page */
  summary?: string;
  canPrevious: boolean;
  canNext: boolean;
  onPrevious: () => void;
  onNext: () => void;
}) {
  return (
    <nav aria-label="Pages" className="flex items-center justify-between gap-3">
      <span className="text-xs text-muted" data-testid="page-number">
        Page {props.page}
        {props.summary && ` · ${props.summary}`}
      </span>
      <div className="flex gap-2">
        <button type="button" className={buttonClass("secondary", "sm")} disabled={!props.canPrevious} onClick={props.onPrevious} data-testid="page-previous">
          ← Previous
        </button>
        <button type="button" className={buttonClass("secondary", "sm")} disabled={!props.canNext} onClick={props.onNext} data-testid="page-next">
          Next →
        </button>
      </div>
    </nav>
  );
}
