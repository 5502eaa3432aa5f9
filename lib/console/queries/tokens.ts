import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { apiFetch } from "@/lib/console/api";
import { consoleKeys } from "./query-keys";

/** An API token as GET /api/v1/tokens lists it: never its secret. */
export interface TokenRow {
  id: string;
  scope: string;
  label: string | null;
  prefix: string;
  advisoryKeys: boolean;
  createdAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

/** A token just created: the only answer that holds its secret. */
export interface CreatedToken {
  id: string;
  token: string;
  scope: string;
  prefix: string;
  advisoryKeys: boolean;
}

/** Every token of the deployment, newest first, starting from what the server rendered. */
export function useTokens(initial: TokenRow[]) {
  return useQuery({
    queryKey: consoleKeys.tokens.all,
    queryFn: () => apiFetch<{ tokens: TokenRow[] }>("/api/v1/tokens").then((r) => r.tokens),
    initialData: initial,
  });
}

export function useCreateToken(onCreated: (token: CreatedToken) => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (json: { scope: string; label?: string; advisoryKeys: boolean }) => apiFetch<CreatedToken>("/api/v1/tokens", { method: "POST", json }),
    onSuccess: (token) => {
      onCreated(token);
      void queryClient.invalidateQueries({ queryKey: consoleKeys.tokens.all });
    },
  });
}

export function useRevokeToken(id: string, onDone: () => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (reason: string) => apiFetch(`/api/v1/tokens/${encodeURIComponent(id)}/revoke`, { method: "POST", json: { reason } }),
    onSuccess: () => {
      onDone();
      void queryClient.invalidateQueries({ queryKey: consoleKeys.tokens.all });
    },
  });
}
