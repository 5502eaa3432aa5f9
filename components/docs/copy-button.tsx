"use client";

import { useState, useSyncExternalStore } from "react";
import { buttonClass } from "@/components/ui/styles";

const noSubscription = () => () => {};

/**
 * Whether the clipboard API is there: it needs a secure context, so on plain HTTP it is not. The
 * server cannot know, so hydration renders as the server did (offered) and the browser's answer
 * follows in the next render: deciding during hydration would be a mismatch (React error #418).
 */
function useClipboardAvailable(): boolean {
  return useSyncExternalStore(noSubscription, () => typeof navigator !== "undefined" && Boolean(navigator.clipboard), () => true);
}

export function CopyButton({ text, label = "Copy", testId }: { text: string; label?: string; testId?: string }) {
  const [copied, setCopied] = useState(false);
  const available = useClipboardAvailable();
  if (!available) return null;
  return (
    <button
      type="button"
      className={buttonClass("ghost", "sm")}
      data-testid={testId}
      onClick={() =>
        navigator.clipboard.writeText(text).then(
          () => {
            setCopied(true);
            setTimeout(() => setCopied(false), 1_500);
          },
          () => {},
        )
      }
    >
      {copied ? "Copied" : label}
    </button>
  );
}
