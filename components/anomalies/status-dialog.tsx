"use client";

import { ReasonDialog } from "@/components/ui/reason-dialog";
import { useAnomalyStatus, type AnomalyView } from "@/lib/console/queries/anomalies";

export type TargetStatus = "acknowledged" | "resolved" | "open";

export const STATUS_ACTIONS: Record<TargetStatus, { button: string; title: string; pending: string; explain: string }> = {
  acknowledged: {
    button: "Acknowledge",
    title: "Acknowledge this anomaly",
    pending: "Acknowledging…",
    explain: "Says someone is looking into it. It leaves the open list and stays under Acknowledged until it is resolved.",
  },
  resolved: {
    button: "Mark resolved",
    title: "Mark this anomaly resolved",
    pending: "Resolving…",
    explain:
      "Says the cause is dealt with: the key released or resolved, a duplicate side effect reversed, or the caller fixed. This changes only the anomaly, not the key.",
  },
  open: {
    button: "Reopen",
    title: "Reopen this anomaly",
    pending: "Reopening…",
    explain: "Puts it back on the open list, for example when the fix did not hold.",
  },
};

type StatusCopy = (typeof STATUS_ACTIONS)[TargetStatus];

/**
 * A fresh-key duplicate's status is a verdict (lib/anomalies/anomalies.ts FRESH_KEY_VERDICTS):
 * acknowledged = a genuine repeat, resolved = a duplicate that got through.
 */
const FRESH_KEY_ACTIONS: Partial<Record<TargetStatus, StatusCopy>> = {
  acknowledged: {
    button: "A genuine repeat",
    title: "A genuine repeat",
    pending: "Saving…",
    explain:
      "Says the caller meant this action twice (for example, the customer really ordered twice): nothing to reverse. It leaves the open list and is not counted among the duplicates that got through.",
  },
  resolved: {
    button: "A duplicate that got through",
    title: "Confirm a duplicate that got through",
    pending: "Confirming…",
    explain:
      "Confirms that the second execution repeated the first: one action, its side effect done twice. Reverse the second side effect if that is not done yet (for a charge: refund it). The tool's page counts it among the duplicates that got through under fresh keys, and the audit trail records your confirmation.",
  },
};

/** The buttons and dialog texts of each status change for an anomaly of this type. */
export function statusActionsFor(type: string): Record<TargetStatus, StatusCopy> {
  return type === "fresh_key_duplicate" ? { ...STATUS_ACTIONS, ...FRESH_KEY_ACTIONS } : STATUS_ACTIONS;
}

/** Changes an anomaly's status after the operator says why; the API records both in the audit trail. */
export function StatusDialog({ anomaly, target, onClose, onDone }: { anomaly: AnomalyView; target: TargetStatus; onClose: () => void; onDone: (a: AnomalyView) => void }) {
  const copy = statusActionsFor(anomaly.type)[target];
  const mutation = useAnomalyStatus(anomaly.id, target, onDone);
  return (
    <ReasonDialog
      title={copy.title}
      testId="status-dialog"
      onClose={onClose}
      onConfirm={(reason) => mutation.mutate(reason)}
      pending={mutation.isPending}
      error={mutation.error}
      confirm={{ label: copy.button, pendingLabel: copy.pending, testId: "confirm-status" }}
      errorTestId="status-error"
    >
      <p className="text-[13px]">
        {copy.explain} It is now <strong>{anomaly.status}</strong>.
      </p>
    </ReasonDialog>
  );
}
