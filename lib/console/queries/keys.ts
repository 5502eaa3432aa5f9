import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { apiFetch, keyPath } from "@/lib/console/api";
import type { BulkReleaseResult } from "@/lib/operator/bulk-release-keys";
import type { KeyPage, KeyView } from "@/lib/operator/present-key";
import type { KeyDetailView } from "@/lib/operator/present-key-detail";
import { consoleKeys } from "./query-keys";

// Keys: the list, one key's page, the held-key counts, and the decisions that change a key. Every
// decision refreshes everything the console holds about keys (consoleKeys.keys.all).

const interval = (pollMs: number) => (pollMs > 0 ? pollMs : false);

/** A page of GET /api/v1/keys (`search` is its query string), polled every `pollMs` (0: never); the last page stays shown while the next loads. */
export function useKeys(search: string, pollMs: number) {
  return useQuery({
    queryKey: consoleKeys.keys.list(search),
    queryFn: ({ signal }) => apiFetch<KeyPage>(`/api/v1/keys?${search}`, { signal }),
    placeholderData: keepPreviousData,
    // React Query never starts an interval refetch while one is still in flight
    refetchInterval: interval(pollMs),
    refetchIntervalInBackground: false,
  });
}

/** Keys held until someone decides; a bulk release acts only on these, never on a running call. */
export const HELD_STATES: string[] = ["stuck", "unknown"];
export type HeldState = "stuck" | "unknown";
export type HeldFilter = { state: HeldState | null; tool: string | null; scope: string | null; prefix: string | null };

/**
 * How many stuck or unknown keys match a filter (at most `limit` per state, `more` when there are
 * further ones): the bulk release's count, and whether "Release all matching" has anything to release.
 */
export async function countHeld(filter: HeldFilter, limit: number, signal?: AbortSignal): Promise<{ n: number; more: boolean }> {
  const states = filter.state ? [filter.state] : HELD_STATES;
  const pages = await Promise.all(
    states.map((state) => {
      const params = new URLSearchParams({ limit: String(limit) });
      for (const [k, v] of Object.entries({ ...filter, state })) if (v) params.set(k, v);
      return apiFetch<KeyPage>(`/api/v1/keys?${params}`, { signal });
    }),
  );
  return { n: pages.reduce((sum, p) => sum + p.items.length, 0), more: pages.some((p) => p.nextCursor !== null) };
}

/** countHeld as a query: `pollMs` keeps it fresh beside a polled list; `fresh` counts anew on every mount. */
export function useHeldCount(filter: HeldFilter | null, limit: number, options: { enabled: boolean; pollMs?: number; fresh?: boolean }) {
  return useQuery({
    queryKey: consoleKeys.keys.held(filter ?? {}, limit),
    queryFn: ({ signal }) => countHeld(filter!, limit, signal),
    enabled: options.enabled && filter !== null,
    ...(options.pollMs !== undefined ? { refetchInterval: interval(options.pollMs), refetchIntervalInBackground: false } : {}),
    ...(options.fresh ? { staleTime: 0 } : {}),
  });
}

/** One key's page data, starting from what the server rendered; `pollMs` says how often to read it again for the state it is in. */
export function useKeyDetail(initial: KeyDetailView, renderedAtMs: number, pollMs: (state: string) => number | false) {
  return useQuery({
    queryKey: consoleKeys.keys.detail(initial.scope, initial.key),
    queryFn: ({ signal }) => apiFetch<KeyDetailView>(keyPath(initial.scope, initial.key), { signal }),
    initialData: initial,
    initialDataUpdatedAt: renderedAtMs,
    refetchInterval: (q) => pollMs(q.state.data?.state ?? ""),
  });
}

/** a key as an anomaly's page shows it now: its state, and its reservation's token and execution (null when absent) */
export type KeyNow = { state: string; token: number | null; executionId: string | null; prefill?: KeyDetailView["prefill"] };

/** The key an anomaly is about, as it is now (null scope or key: the anomaly has none, nothing is read). */
export function useKeyNow(scope: string | null, key: string | null, initial: KeyNow | null, renderedAtMs: number) {
  return useQuery({
    queryKey: consoleKeys.keys.now(scope, key),
    queryFn: ({ signal }) =>
      apiFetch<Pick<KeyDetailView, "state" | "record" | "prefill">>(keyPath(scope!, key!), { signal }).then(
        (d): KeyNow => ({ state: d.state, token: d.record?.token ?? null, executionId: d.record?.executionId ?? null, prefill: d.prefill }),
      ),
    enabled: scope !== null && key !== null,
    initialData: initial ?? undefined,
    initialDataUpdatedAt: renderedAtMs,
    // an inflight key becomes stuck on its own when its lease passes
    refetchInterval: (q) => (q.state.data?.state === "inflight" ? 3_000 : false),
  });
}

/** An operator's decision on one key, as POST …/release or …/resolve takes it. */
export type KeyDecision =
  | { action: "release"; reason: string; force?: boolean; token?: number }
  | { action: "resolve"; reason: string; result: unknown; status?: number; force?: boolean; token?: number };

/** "It did not happen" (release) or "It happened" (resolve) for one key. */
export function useDecideKey(scope: string, key: string, onDone: (decision: KeyDecision) => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: ({ action, ...json }: KeyDecision) => apiFetch(`${keyPath(scope, key)}/${action}`, { method: "POST", json }),
    onSuccess: (_, decision) => {
      onDone(decision);
      void queryClient.invalidateQueries({ queryKey: consoleKeys.keys.all });
    },
  });
}

/** what POST /api/v1/keys/bulk-release takes: the keys selected (each with the token the operator saw), or a filter */
export type BulkRelease = { reason: string; keys: { scope: string; key: string; token: number }[] } | { reason: string; filter: Partial<HeldFilter> };

export function useBulkRelease(onDone: (result: BulkReleaseResult) => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (json: BulkRelease) => apiFetch<BulkReleaseResult>("/api/v1/keys/bulk-release", { method: "POST", json }),
    onSuccess: (result) => {
      onDone(result);
      void queryClient.invalidateQueries({ queryKey: consoleKeys.keys.all });
    },
  });
}

/** What POST /api/v1/keys/{scope}/{key}/probe answers: the tool's word, and what Idemgate did with it. */
export interface ProbeResult {
  answer: { outcome: "applied"; status?: number; body?: unknown } | { outcome: "not_applied" } | { outcome: "unknown"; note?: string };
  action: "resolved" | "released" | "none";
  record: KeyView | null;
}

/** Asks the key's tool (its status probe) whether the call happened; the answer resolves or releases the key. */
export function useAskTool(scope: string, key: string, onAnswered: (result: ProbeResult) => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: () => apiFetch<ProbeResult>(`${keyPath(scope, key)}/probe`, { method: "POST", json: {} }),
    onSuccess: (result) => {
      onAnswered(result);
      void queryClient.invalidateQueries({ queryKey: consoleKeys.keys.all });
    },
  });
}
