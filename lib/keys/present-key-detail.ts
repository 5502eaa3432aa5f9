import type { KeyDetail, TimelineEvent } from "./get-key-detail";
import { presentKey, type KeyView } from "./present-key";

type Jsonified<E> = E extends { at: Date; leaseUntil: Date } ? Omit<E, "at" | "leaseUntil"> & { at: string; leaseUntil: string } : E extends { at: Date } ? Omit<E, "at"> & { at: string } : E;

export type TimelineEventView = Jsonified<TimelineEvent>;

/** A key's detail as GET /api/v1/keys/{scope}/{key} answers it (dates as ISO strings). */
export interface KeyDetailView {
  scope: string;
  key: string;
  record: KeyView | null;
  state: KeyDetail["state"];
  probeable: boolean;
  timeline: TimelineEventView[];
}

export function presentKeyDetail(detail: KeyDetail, nowMs = Date.now()): KeyDetailView {
  const view = { ...detail, record: detail.record ? presentKey(detail.record, nowMs, true) : null };
  return JSON.parse(JSON.stringify(view)) as KeyDetailView;
}
