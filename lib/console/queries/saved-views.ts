import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { apiFetch } from "@/lib/console/api";
import type { SavedView, ViewPage } from "@/lib/console/saved-views";
import { consoleKeys } from "./query-keys";

// The operator's own saved views of a list page (/api/v1/console/views). A change is reported once
// the page's list has been read again, so the menu never shows the list from before it.

/** The operator's views of `page`, read only while `enabled` (the menu is open). */
export function useSavedViews(page: ViewPage, enabled: boolean) {
  return useQuery({
    queryKey: consoleKeys.savedViews.page(page),
    queryFn: ({ signal }) => apiFetch<{ views: SavedView[] }>(`/api/v1/console/views?page=${page}`, { signal }),
    enabled,
  });
}

export function useSaveView(page: ViewPage, onSaved: (view: SavedView) => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (input: { name: string; query: string }) => apiFetch<SavedView>("/api/v1/console/views", { method: "POST", json: { page, ...input } }),
    onSuccess: async (view) => {
      await queryClient.invalidateQueries({ queryKey: consoleKeys.savedViews.page(page) });
      onSaved(view);
    },
  });
}

export function useDeleteView(page: ViewPage, id: string, onDeleted: () => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: () => apiFetch(`/api/v1/console/views/${encodeURIComponent(id)}`, { method: "DELETE" }),
    onSuccess: async () => {
      await queryClient.invalidateQueries({ queryKey: consoleKeys.savedViews.page(page) });
      onDeleted();
    },
  });
}
