"use client";

import { useCallback, useSyncExternalStore } from "react";

export const POLL_CHOICES = [
  { ms: 0, label: "Off" },
  { ms: 2_000, label: "2s" },
  { ms: 5_000, label: "5s" },
  { ms: 15_000, label: "15s" },
] as const;

const STORAGE_KEY = "idemgate.pollIntervalMs";
const DEFAULT_MS = 5_000;
const listeners = new Set<() => void>();

function read(): number {
  try {
    const raw = window.localStorage.getItem(STORAGE_KEY);
    const ms = raw === null ? DEFAULT_MS : Number(raw);
    return POLL_CHOICES.some((c) => c.ms === ms) ? ms : DEFAULT_MS;
  } catch {
    return DEFAULT_MS;
  }
}

function subscribe(listener: () => void) {
  listeners.add(listener);
  window.addEventListener("storage", listener);
  return () => {
    listeners.delete(listener);
    window.removeEventListener("storage", listener);
  };
}

/** The polling interval the operator picked, kept in localStorage; 0 means off. */
export function usePollInterval(): [number, (ms: number) => void] {
  const ms = useSyncExternalStore(subscribe, read, () => DEFAULT_MS);
  const set = useCallback((next: number) => {
    try {
      window.localStorage.setItem(STORAGE_KEY, String(next));
    } catch {
      // private mode: the choice lasts for this page only
    }
    listeners.forEach((l) => l());
  }, []);
  return [ms, set];
}
