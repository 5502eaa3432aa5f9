"use client";

import { useRouter } from "next/navigation";
import { useState } from "react";
import clsx from "clsx";
import { ReasonDialog } from "@/components/ui/reason-dialog";
import { buttonClass } from "@/components/ui/styles";
import { usePauseTool } from "@/lib/console/queries/tools";

export interface PauseState {
  tool: string;
  paused: boolean;
  reason: string | null;
  actor: string | null;
  pausedAt: string | null;
  source: "operator" | "config" | null;
}

/**
 * A write tool's pause: who paused it, when and why, and the button that pauses or resumes it (for
 * operators; the server checks the role again and records the action). A pause stops the tool's new
 * calls in every server process within a second; replays and calls already running go on.
 */
export function PausePanel({ state, canPause }: { state: PauseState; canPause: boolean }) {
  const router = useRouter();
  const [open, setOpen] = useState(false);
  const verb = state.paused ? "resume" : "pause";
  const mutation = usePauseTool(state.tool, verb, () => {
    setOpen(false);
    router.refresh();
  });
  const close = () => {
    setOpen(false);
    mutation.reset();
  };
  return (
    <section
      data-testid="pause-panel"
      data-paused={state.paused ? "true" : "false"}
      className={clsx("min-w-0 rounded-xl border px-5 py-4 shadow-xs", state.paused ? "border-warn/40 bg-warn-soft" : "border-line bg-surface")}
    >
      <div className="flex flex-wrap items-center justify-between gap-3">
        <div className="min-w-0">
          <h2 className="text-sm font-semibold">{state.paused ? "Paused: new calls are refused" : "Running: new calls are accepted"}</h2>
          {state.paused ? (
            <p className="mt-1 text-[13px] break-words text-muted" data-testid="pause-detail">
              {state.source === "config" ? "Declared " : `By ${state.actor ?? "an operator"}${state.pausedAt ? ` at ${state.pausedAt.slice(0, 19).replace("T", " ")} UTC` : ""}: `}
              <span className="text-fg">{state.source === "config" ? "paused: true in the configuration file." : asSentence(state.reason ?? "")}</span> Callers get 503 tool_paused and nothing
              is reserved; a retry of a key that already has a result still gets it.
            </p>
          ) : (
            <p className="mt-1 text-[13px] text-muted">Pausing refuses every new call of this tool within a second, in every server process, before a key is taken.</p>
          )}
        </div>
        {canPause && state.source !== "config" && (
          <button type="button" className={buttonClass(state.paused ? "primary" : "danger", "sm")} onClick={() => setOpen(true)} data-testid={`${verb}-tool`}>
            {state.paused ? "Resume" : "Pause tool"}
          </button>
        )}
      </div>
      {open && (
        <ReasonDialog
          title={state.paused ? `Resume ${state.tool}` : `Pause ${state.tool}`}
          testId="pause-dialog"
          onClose={close}
          onConfirm={(reason) => mutation.mutate(reason)}
          pending={mutation.isPending}
          error={mutation.error}
          confirm={{ label: state.paused ? "Resume" : "Pause", pendingLabel: state.paused ? "Resuming…" : "Pausing…", testId: `confirm-${verb}`, tone: state.paused ? "primary" : "danger" }}
          errorTestId="pause-error"
        >
          <p className="text-[13px]">
            {state.paused
              ? "New calls of this tool run again, in every server process within a second."
              : "Every new call of this tool is refused with 503 tool_paused, in every server process within a second, before anything is reserved. Replays of done keys, and calls already running, go on. Callers see the reason."}
          </p>
        </ReasonDialog>
      )}
    </section>
  );
}

/** An operator's reason ended as a sentence, so the explanation after it reads as the next one. */
function asSentence(text: string): string {
  return /[.!?…]$/.test(text.trim()) ? text : `${text}.`;
}
