"use client";

import { useState } from "react";
import { buttonClass } from "@/components/ui/styles";

export function CopyButton({ text, label = "Copy" }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  // the clipboard API needs a secure context; on plain HTTP the button is not offered
  if (typeof navigator !== "undefined" && !navigator.clipboard) return null;
  return (
    <button
      type="button"
      className={buttonClass("ghost", "sm")}
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
