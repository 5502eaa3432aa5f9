"use client";

import { useState } from "react";
import { Dialog } from "@/components/ui/dialog";
import { ProblemAlert } from "@/components/ui/problem-alert";
import { ReasonField, reasonOk } from "@/components/ui/reason-field";
import { buttonClass } from "@/components/ui/styles";

/**
 * The confirmation of an operator action that needs a reason (revoke a token, change an anomaly's
 * status, release keys in bulk, redeliver a webhook event): what it does (`children`), the reason
 * field, the API's problem when it refused, Cancel and the action's button. `onConfirm` gets the
 * reason; the caller's mutation sends it and says whether it is pending and what it failed with.
 */
export function ReasonDialog({
  title,
  testId,
  onClose,
  onConfirm,
  pending,
  error,
  confirm,
  reasonId,
  errorTestId,
  children,
}: {
  title: string;
  testId: string;
  onClose: () => void;
  onConfirm: (reason: string) => void;
  pending: boolean;
  error: unknown;
  confirm: { label: string; pendingLabel: string; testId: string; tone?: "primary" | "danger"; disabled?: boolean };
  reasonId?: string;
  errorTestId?: string;
  children: React.ReactNode;
}) {
  const [reason, setReason] = useState("");
  const ready = reasonOk(reason) && !pending && !confirm.disabled;
  return (
    <Dialog open onClose={onClose} title={title} testId={testId}>
      <form
        className="space-y-4"
        onSubmit={(e) => {
          e.preventDefault();
          if (ready) onConfirm(reason);
        }}
      >
        {children}
        <ReasonField value={reason} onChange={setReason} id={reasonId} />
        {error ? <ProblemAlert error={error} testId={errorTestId} /> : null}
        <div className="flex justify-end gap-2">
          <button type="button" className={buttonClass("secondary")} onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className={buttonClass(confirm.tone ?? "primary")} disabled={!ready} data-testid={confirm.testId}>
            {pending ? confirm.pendingLabel : confirm.label}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
