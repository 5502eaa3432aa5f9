"use client";

import { useMutation } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { Dialog } from "@/components/ui/dialog";
import { ProblemAlert } from "@/components/ui/problem-alert";
import { ReasonField, reasonOk } from "@/components/ui/reason-field";
import { buttonClass } from "@/components/ui/styles";
import { apiFetch } from "@/lib/console/api";

/**
 * Sends a delivered or failed event to its endpoint again, after the operator says why: the same
 * event id (receivers that have it already drop it), new attempts with new signatures. The server
 * checks the role and records the action in the audit trail.
 */
export function RedeliverButton({ id, eventId, endpoint }: { id: string; eventId: string; endpoint: string }) {
  const router = useRouter();
  const [open, setOpen] = useState(false);
  const [reason, setReason] = useState("");
  const mutation = useMutation({
    mutationFn: () => apiFetch(`/api/v1/webhooks/deliveries/${encodeURIComponent(id)}/redeliver`, { method: "POST", json: { reason } }),
    onSuccess: () => {
      setOpen(false);
      router.refresh();
    },
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
        <Dialog open onClose={close} title="Send this event again" testId="redeliver-dialog">
          <form
            className="space-y-4"
            onSubmit={(e) => {
              e.preventDefault();
              if (reasonOk(reason) && !mutation.isPending) mutation.mutate();
            }}
          >
            <p className="text-[13px]">
              Queues event <span className="font-mono text-[12px] break-all">{eventId}</span> for <strong>{endpoint}</strong> again, with the same event id (a receiver
              that has it already can drop it) and a new series of attempts, each signed anew.
            </p>
            <ReasonField id={`reason-${id}`} value={reason} onChange={setReason} />
            {mutation.error && <ProblemAlert error={mutation.error} testId="redeliver-error" />}
            <div className="flex justify-end gap-2">
              <button type="button" className={buttonClass("secondary")} onClick={close}>
                Cancel
              </button>
              <button type="submit" className={buttonClass("primary")} disabled={!reasonOk(reason) || mutation.isPending} data-testid="confirm-redeliver">
                {mutation.isPending ? "Queuing…" : "Redeliver"}
              </button>
            </div>
          </form>
        </Dialog>
      )}
    </>
  );
}
