import { useMutation, useQuery, useQueryClient, type QueryClient } from "@tanstack/react-query";
import { apiFetch } from "@/lib/console/api";
import type { SavedView, ViewPage } from "@/lib/console/saved-views";
import { consoleKeys } from "./query-keys";

// The operator's own saved views of a list page (/api/v1/console/views). A change is reported once
// the page's list has been read again, so the menu never shows the list from before it.

function listOf(page: ViewPage) {
  return ({ signal }: { signal: AbortSignal }) => apiFetch<{ views: SavedView[] }>(`/api/v1/console/views?page=${page}`, { signal });
}

/** The operator's views of `page`, read only while `enabled` (the menu is open). */
export function useSavedViews(page: ViewPage, enabled: boolean) {
  return useQuery({ queryKey: consoleKeys.savedViews.page(page), queryFn: listOf(page), enabled });
}

/**
 * Reads the page's list again after a change, whether the menu is open or not (a closed menu's
 * query is disabled, and invalidating it alone reads nothing). A read begun before the change is
 * cancelled first: its answer, arriving after the change, would otherwise stand as the fresh list.
 * Should the new read fail, the list stays marked stale and the menu reads it when it opens.
 */
async function readAgain(queryClient: QueryClient, page: ViewPage): Promise<void> {
  const queryKey = consoleKeys.savedViews.page(page);
  await queryClient.cancelQueries({ queryKey });
  await queryClient.invalidateQueries({ queryKey });
  await queryClient.prefetchQuery({ queryKey, queryFn: listOf(page), staleTime: 0 });
}

export function useSaveView(page: ViewPage, onSaved: (view: SavedView) => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (input: { name: string; query: string }) => apiFetch<SavedView>("/api/v1/console/views", { method: "POST", json: { page, ...input } }),
    onSuccess: async (view) => {
      await readAgain(queryClient, page);
      onSaved(view);
    },
  });
}

export function useDeleteView(page: ViewPage, id: string, onDeleted: () => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: () => apiFetch(`/api/v1/console/views/${encodeURIComponent(id)}`, { method: "DELETE" }),
    onSuccess: async () => {
      await readAgain(queryClient, page);
      onDeleted();
    },
  });
}
