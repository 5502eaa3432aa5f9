/**
 * Every React Query key of the console, built here and nowhere else. Keys nest by resource, so a
 * mutation refreshes a whole resource by its prefix (`consoleKeys.keys.all` covers the list, each
 * key's detail and the held-key counts).
 */
export const consoleKeys = {
  keys: {
    all: ["keys"] as const,
    list: (search: string) => ["keys", "list", search] as const,
    /** a key's page: its record, result and timeline */
    detail: (scope: string, key: string) => ["keys", "detail", scope, key] as const,
    /** a key as an anomaly's page shows it: its state and its reservation */
    now: (scope: string | null, key: string | null) => ["keys", "now", scope, key] as const,
    /** how many stuck or unknown keys match a filter, counted up to `limit` */
    held: (filter: object, limit: number) => ["keys", "held", filter, limit] as const,
  },
  anomalies: {
    all: ["anomalies"] as const,
    lists: ["anomalies", "list"] as const,
    list: (search: string) => ["anomalies", "list", search] as const,
    counts: ["anomalies", "counts"] as const,
    detail: (id: string) => ["anomalies", "detail", id] as const,
  },
  tokens: {
    all: ["tokens"] as const,
  },
  savedViews: {
    page: (page: string) => ["saved-views", page] as const,
  },
};
