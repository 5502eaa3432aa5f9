import { keepPreviousData, useMutation, useQuery, useQueryClient, type UseMutationResult } from "@tanstack/react-query";
import { apiFetch } from "@/lib/console/api";
import type { AnomalyArguments } from "@/lib/anomalies/anomaly-arguments";
import { consoleKeys } from "./query-keys";

// Anomalies: the list and its open counts, one anomaly, a status change, a reconciler pass.

/** An anomaly as the API answers it (dates as ISO strings). */
export interface AnomalyView {
  id: string;
  type: string;
  tool: string;
  scope: string | null;
  key: string | null;
  status: string;
  summary: string;
  evidence: Record<string, unknown>;
  detectedAt: string;
  updatedAt: string;
  /** the kept arguments of the executions the evidence names (GET /api/v1/anomalies/{id} only) */
  arguments?: AnomalyArguments[];
}

export interface AnomalyPage {
  items: AnomalyView[];
  nextCursor: string | null;
}

/** What POST /api/v1/anomalies/reconcile answers. */
export interface ReconcileResult {
  examined: { executions: number; suppressions: number; effects: number };
  backfilled: number;
  flagged: number;
  created: number;
}

const interval = (pollMs: number) => (pollMs > 0 ? pollMs : false);

/** A page of GET /api/v1/anomalies (`search` is its query string), polled every `pollMs` (0: never). */
export function useAnomalies(search: string, pollMs: number) {
  return useQuery({
    queryKey: consoleKeys.anomalies.list(search),
    queryFn: ({ signal }) => apiFetch<AnomalyPage>(`/api/v1/anomalies?${search}`, { signal }),
    placeholderData: keepPreviousData,
    refetchInterval: interval(pollMs),
    refetchIntervalInBackground: false,
  });
}

/** Open anomalies per type: read by the page's server action `load`, starting from what the server rendered. */
export function useAnomalyCounts(load: () => Promise<Record<string, number>>, initial: Record<string, number> | null, pollMs: number) {
  return useQuery({
    queryKey: consoleKeys.anomalies.counts,
    queryFn: () => load(),
    initialData: initial ?? undefined,
    initialDataUpdatedAt: Date.now(),
    refetchInterval: interval(pollMs),
    refetchIntervalInBackground: false,
  });
}

/** One anomaly, starting from what the server rendered at `renderedAtMs`. */
export function useAnomaly(initial: AnomalyView, renderedAtMs: number) {
  return useQuery({
    queryKey: consoleKeys.anomalies.detail(initial.id),
    queryFn: ({ signal }) => apiFetch<AnomalyView>(`/api/v1/anomalies/${encodeURIComponent(initial.id)}`, { signal }),
    initialData: initial,
    initialDataUpdatedAt: renderedAtMs,
  });
}

/** the lists and the open counts: what a status change or a reconciler pass changes */
function refreshLists(queryClient: ReturnType<typeof useQueryClient>) {
  void queryClient.invalidateQueries({ queryKey: consoleKeys.anomalies.lists });
  void queryClient.invalidateQueries({ queryKey: consoleKeys.anomalies.counts });
}

/** Changes an anomaly's status with the operator's reason; the answer replaces the anomaly shown. */
export function useAnomalyStatus(id: string, status: string, onDone: (updated: AnomalyView) => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (reason: string) => apiFetch<AnomalyView>(`/api/v1/anomalies/${encodeURIComponent(id)}/status`, { method: "POST", json: { status, reason } }),
    onSuccess: (updated) => {
      queryClient.setQueryData(consoleKeys.anomalies.detail(id), updated);
      refreshLists(queryClient);
      onDone(updated);
    },
  });
}

export type Reconcile = UseMutationResult<ReconcileResult, Error, void>;

/** One reconciler pass now; the API records who asked for it in the audit trail. */
export function useReconcile(): Reconcile {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: () => apiFetch<ReconcileResult>("/api/v1/anomalies/reconcile", { method: "POST" }),
    onSuccess: () => refreshLists(queryClient),
  });
}
