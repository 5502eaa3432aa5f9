import { useMutation, useQueryClient } from "@tanstack/react-query";
import { apiFetch } from "@/lib/console/api";
import type { GatewayExchange } from "@/lib/gateway/console-invoke";
import { consoleKeys } from "./query-keys";

/** What the console's invoke form sends: the call as a caller would make it. */
export interface ConsoleInvoke {
  key: string | null;
  scope: string;
  session: string | null;
  /** the arguments as the operator typed them (JSON text) */
  arguments: string;
}

/**
 * Runs a tool through POST /api/v1/console/invoke (the gateway's own path) and answers the exchange
 * as a caller would see it. A call can reserve a key, so the keys the console holds are read again.
 */
export function useInvokeTool(tool: string, onAnswered: (exchange: GatewayExchange, input: ConsoleInvoke) => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (input: ConsoleInvoke) => apiFetch<GatewayExchange>("/api/v1/console/invoke", { method: "POST", json: { tool, ...input } }),
    onSuccess: (exchange, input) => {
      onAnswered(exchange, input);
      void queryClient.invalidateQueries({ queryKey: consoleKeys.keys.all });
    },
  });
}

/**
 * Pauses or resumes a write tool with the operator's reason. The tool page is rendered on the
 * server, so `onDone` refreshes it (nothing of it is in the query cache).
 */
export function usePauseTool(tool: string, verb: "pause" | "resume", onDone: () => void) {
  return useMutation({
    mutationFn: (reason: string) => apiFetch(`/api/v1/tools/${encodeURIComponent(tool)}/${verb}`, { method: "POST", json: { reason } }),
    onSuccess: onDone,
  });
}
