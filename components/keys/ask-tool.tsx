"use client";

import clsx from "clsx";
import { buttonClass } from "@/components/ui/styles";
import type { ProbeResult } from "@/lib/console/queries/keys";

export function AskToolButton({ pending, onClick }: { pending: boolean; onClick: () => void }) {
  return (
    <button type="button" className={buttonClass("secondary")} onClick={onClick} disabled={pending} data-testid="probe-button">
      {pending ? "Asking the tool…" : "Ask the tool"}
    </button>
  );
}

function sentence(result: ProbeResult): { tone: "ok" | "neutral"; text: React.ReactNode } {
  const { answer, action } = result;
  if (answer.outcome === "applied" && action === "resolved") {
    return {
      tone: "ok",
      text: (
        <>
          The tool says <strong>it happened</strong>: the key is resolved with the tool&apos;s result
          {answer.status !== undefined && <> (HTTP <span className="font-mono">{answer.status}</span>)</>}, and retries get that result.
        </>
      ),
    };
  }
  if (answer.outcome === "not_applied" && action === "released") {
    return {
      tone: "ok",
      text: (
        <>
          The tool says <strong>it did not happen</strong>: the key is released, and the next call with it runs the tool.
        </>
      ),
    };
  }
  if (answer.outcome === "unknown") {
    return {
      tone: "neutral",
      text: (
        <>
          The tool <strong>cannot tell</strong> whether it happened{answer.note ? <> ({answer.note})</> : null}. The key stays held: check the downstream system, then
          choose <strong>It happened</strong> or <strong>It did not happen</strong>.
        </>
      ),
    };
  }
  // the tool answered, but the key had changed meanwhile (another operator, the reconciler, a late completion)
  const said = answer.outcome === "applied" ? "it happened" : "it did not happen";
  return {
    tone: "neutral",
    text: (
      <>
        The tool says {said}, but the key was left as it is{result.record ? <> (now {result.record.state})</> : <> (no longer in the key store)</>}: it changed
        while the tool was asked.
      </>
    ),
  };
}

/** The tool's answer, in words an operator acts on. */
export function ProbeAnswerNotice({ result, onDismiss }: { result: ProbeResult; onDismiss: () => void }) {
  const { tone, text } = sentence(result);
  return (
    <div
      role="status"
      data-testid="probe-answer"
      data-outcome={result.answer.outcome}
      data-action={result.action}
      className={clsx(
        "flex items-start justify-between gap-4 rounded-lg border px-4 py-3 text-[13px]",
        tone === "ok" ? "border-ok/40 bg-ok-soft" : "border-line-strong bg-surface",
      )}
    >
      <p>{text}</p>
      <button type="button" className={buttonClass("ghost", "sm")} onClick={onDismiss} aria-label="Dismiss">
        Dismiss
      </button>
    </div>
  );
}
