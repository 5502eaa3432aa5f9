"use client";

import { useRouter } from "next/navigation";
import { useState } from "react";
import { ReasonDialog } from "@/components/ui/reason-dialog";
import { buttonClass } from "@/components/ui/styles";
import { useRedeliver } from "@/lib/console/queries/webhooks";

/**
 * Sends a delivered or failed event to its endpoint again, after the operator says why: the same
 * event id (receivers that have it already drop it), new attempts with new signatures. The server
 * checks the role and records the action in the audit trail.
 */
export function RedeliverButton({ id, eventId, endpoint }: { id: string; eventId: string; endpoint: string }) {
  const router = useRouter();
  const [open, setOpen] = useState(false);
  const mutation = useRedeliver(id, () => {
    setOpen(false);
    router.refresh();
  });
  const close = () => {
    setOpen(false);
    mutation.reset();
  };
  return (
    <>
      <button type="button" className={buttonClass("secondary", "sm")} onClick={() => setOpen(true)} data-testid="redeliver">
        Redeliver
      </button>
      {/* mounted only while open: the log has a button per row, not a dialog per row */}
      {open && (
        <ReasonDialog
          title="Send this event again"
          testId="redeliver-dialog"
          onClose={close}
          onConfirm={(reason) => mutation.mutate(reason)}
          pending={mutation.isPending}
          error={mutation.error}
          confirm={{ label: "Redeliver", pendingLabel: "Queuing…", testId: "confirm-redeliver" }}
          reasonId={`reason-${id}`}
          errorTestId="redeliver-error"
        >
          <p className="text-[13px]">
            Queues event <span className="font-mono text-[12px] break-all">{eventId}</span> for <strong>{endpoint}</strong> again, with the same event id (a receiver
            that has it already can drop it) and a new series of attempts, each signed anew.
          </p>
        </ReasonDialog>
      )}
    </>
  );
}
