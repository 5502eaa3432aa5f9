import { useMutation } from "@tanstack/react-query";
import { apiFetch } from "@/lib/console/api";

/**
 * Sends a delivery's event to its endpoint again with the operator's reason. The delivery log is
 * rendered on the server, so `onQueued` refreshes the page (nothing of it is in the query cache).
 */
export function useRedeliver(id: string, onQueued: () => void) {
  return useMutation({
    mutationFn: (reason: string) => apiFetch(`/api/v1/webhooks/deliveries/${encodeURIComponent(id)}/redeliver`, { method: "POST", json: { reason } }),
    onSuccess: onQueued,
  });
}
