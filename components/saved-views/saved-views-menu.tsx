"use client";

import clsx from "clsx";
import Link from "next/link";
import { useEffect, useId, useRef, useState } from "react";
import { createPortal } from "react-dom";
import { Dialog } from "@/components/ui/dialog";
import { ProblemAlert } from "@/components/ui/problem-alert";
import { buttonClass, inputClass } from "@/components/ui/styles";
import { useDeleteView, useSaveView, useSavedViews } from "@/lib/console/queries/saved-views";
import type { SavedView, ViewPage } from "@/lib/console/saved-views";

const hrefOf = (page: ViewPage, query: string) => (query ? `/${page}?${query}` : `/${page}`);

/** The filter as an operator reads it: `state: stuck · tool: payments.charge`. */
function describeQuery(query: string): string {
  const parts = [...new URLSearchParams(query)].map(([k, v]) => `${k}: ${v}`);
  return parts.length ? parts.join(" · ") : "no filter";
}

/**
 * "Views" beside a list's filters: the operator's saved filters of this page (choosing one opens the
 * page with it in the URL), "Save current view…", and delete with a confirmation. Views are the
 * operator's own (/api/v1/console/views); the dialogs are put on <body>, out of the filters' form.
 */
export function SavedViewsMenu({ page, query }: { page: ViewPage; query: string }) {
  const [open, setOpen] = useState(false);
  const [dialog, setDialog] = useState<{ kind: "save" } | { kind: "delete"; view: SavedView } | null>(null);
  const [notice, setNotice] = useState("");
  const button = useRef<HTMLButtonElement>(null);
  const panel = useRef<HTMLDivElement>(null);
  const panelId = useId();
  const views = useSavedViews(page, open);

  useEffect(() => {
    if (!open) return;
    const onPointer = (e: PointerEvent) => {
      const t = e.target as Node;
      if (!panel.current?.contains(t) && !button.current?.contains(t)) setOpen(false);
    };
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== "Escape") return;
      setOpen(false);
      button.current?.focus();
    };
    document.addEventListener("pointerdown", onPointer);
    document.addEventListener("keydown", onKey);
    return () => {
      document.removeEventListener("pointerdown", onPointer);
      document.removeEventListener("keydown", onKey);
    };
  }, [open]);

  const closeDialog = (message?: string) => {
    setDialog(null);
    if (message) setNotice(message);
    button.current?.focus();
  };

  return (
    <div className="relative">
      <button
        ref={button}
        type="button"
        className={buttonClass("secondary")}
        aria-expanded={open}
        aria-controls={panelId}
        onClick={() => setOpen((o) => !o)}
        data-testid="views-button"
      >
        Views
        <svg aria-hidden="true" viewBox="0 0 16 16" className={clsx("size-3.5 transition-transform", open && "rotate-180")} fill="none" stroke="currentColor" strokeWidth="1.6">
          <path d="m4 6 4 4 4-4" />
        </svg>
      </button>
      <span role="status" className="sr-only" data-testid="views-notice">
        {notice}
      </span>
      {open && (
        <div
          ref={panel}
          id={panelId}
          data-testid="views-menu"
          className="absolute right-0 z-20 mt-1 w-80 max-w-[calc(100vw-2rem)] rounded-lg border border-line bg-surface p-2 text-[13px] shadow-lg"
        >
          <p id={`${panelId}-title`} className="px-2 pt-1 pb-2 text-xs font-medium text-muted">
            Your saved views
          </p>
          {views.error ? (
            <ProblemAlert error={views.error} testId="views-error" />
          ) : views.isPending ? (
            <p className="px-2 pb-2 text-muted">Loading…</p>
          ) : views.data.views.length === 0 ? (
            <p className="px-2 pb-2 text-muted" data-testid="views-empty">
              None yet. Set the filters, then save them here.
            </p>
          ) : (
            <ul aria-labelledby={`${panelId}-title`} className="max-h-72 overflow-y-auto">
              {views.data.views.map((v) => (
                <li key={v.id} className="flex items-center gap-1 rounded-md hover:bg-surface-2" data-testid="saved-view">
                  <Link
                    href={hrefOf(page, v.query)}
                    aria-current={v.query === query ? "true" : undefined}
                    onClick={() => setOpen(false)}
                    className="min-w-0 flex-1 rounded-md px-2 py-1.5 focus-visible:outline-2 focus-visible:outline-accent"
                    data-testid="saved-view-link"
                  >
                    <span className={clsx("block truncate", v.query === query && "font-semibold")}>{v.name}</span>
                    <span className="block truncate font-mono text-[11px] text-muted" title={describeQuery(v.query)}>
                      {describeQuery(v.query)}
                    </span>
                  </Link>
                  <button
                    type="button"
                    className={buttonClass("ghost", "sm")}
                    aria-label={`Delete view ${v.name}`}
                    onClick={() => {
                      setOpen(false);
                      setDialog({ kind: "delete", view: v });
                    }}
                    data-testid="delete-view"
                  >
                    Delete
                  </button>
                </li>
              ))}
            </ul>
          )}
          <div className="mt-1 border-t border-line pt-2">
            <button
              type="button"
              className={clsx(buttonClass("ghost"), "w-full justify-start")}
              onClick={() => {
                setOpen(false);
                setDialog({ kind: "save" });
              }}
              data-testid="save-view"
            >
              Save current view…
            </button>
          </div>
        </div>
      )}
      {dialog &&
        createPortal(
          dialog.kind === "save" ? (
            <SaveViewDialog page={page} query={query} onClose={closeDialog} />
          ) : (
            <DeleteViewDialog page={page} view={dialog.view} onClose={closeDialog} />
          ),
          document.body,
        )}
    </div>
  );
}

function SaveViewDialog({ page, query, onClose }: { page: ViewPage; query: string; onClose: (message?: string) => void }) {
  const [name, setName] = useState("");
  const save = useSaveView(page, (v) => onClose(`Saved view ${v.name}`));
  return (
    <Dialog open onClose={() => onClose()} title="Save current view" testId="save-view-dialog">
      <form
        className="space-y-4"
        onSubmit={(e) => {
          e.preventDefault();
          e.stopPropagation();
          if (!save.isPending) save.mutate({ name, query });
        }}
      >
        <p className="text-[13px] text-muted">
          Saves this page&apos;s filter under a name in your own list of views:{" "}
          <span className="font-mono text-[12px] text-fg" data-testid="save-view-filter">
            {describeQuery(query)}
          </span>
        </p>
        <div className="space-y-1">
          <label htmlFor="view-name" className="block text-xs font-medium text-muted">
            Name
          </label>
          <input
            id="view-name"
            value={name}
            onChange={(e) => setName(e.target.value)}
            className={clsx(inputClass, "w-full")}
            autoComplete="off"
            autoFocus
            data-testid="view-name"
          />
        </div>
        {save.error && <ProblemAlert error={save.error} testId="save-view-error" />}
        <div className="flex justify-end gap-2">
          <button type="button" className={buttonClass("secondary")} onClick={() => onClose()}>
            Cancel
          </button>
          <button type="submit" className={buttonClass("primary")} disabled={save.isPending} data-testid="confirm-save-view">
            {save.isPending ? "Saving…" : "Save view"}
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function DeleteViewDialog({ page, view, onClose }: { page: ViewPage; view: SavedView; onClose: (message?: string) => void }) {
  const remove = useDeleteView(page, view.id, () => onClose(`Deleted view ${view.name}`));
  return (
    <Dialog open onClose={() => onClose()} title={`Delete view “${view.name}”?`} testId="delete-view-dialog">
      <p className="text-[13px]">
        Only your list of views changes: the filter <span className="font-mono text-[12px]">{describeQuery(view.query)}</span> is forgotten, nothing else is touched.
      </p>
      {remove.error && (
        <div className="mt-3">
          <ProblemAlert error={remove.error} testId="delete-view-error" />
        </div>
      )}
      <div className="mt-4 flex justify-end gap-2">
        <button type="button" className={buttonClass("secondary")} onClick={() => onClose()}>
          Cancel
        </button>
        <button type="button" className={buttonClass("danger")} disabled={remove.isPending} onClick={() => remove.mutate()} data-testid="confirm-delete-view">
          {remove.isPending ? "Deleting…" : "Delete view"}
        </button>
      </div>
    </Dialog>
  );
}
