"use client";

import { useState } from "react";
import { Dialog } from "@/components/ui/dialog";
import { ProblemAlert } from "@/components/ui/problem-alert";
import { ReasonField, reasonOk } from "@/components/ui/reason-field";
import { reasonPlaceholder, RESULT_PLACEHOLDER } from "@/lib/console/decision-placeholders";
import { buttonClass, inputClass } from "@/components/ui/styles";
import { useDecideKey } from "@/lib/console/queries/keys";

function parseResult(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  if (!text.trim()) return { ok: false, error: "Enter the result duplicates should get, as JSON." };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (err) {
    return { ok: false, error: `Not valid JSON: ${err instanceof Error ? err.message : String(err)}` };
  }
}

function parseStatus(text: string): { ok: true; value: number | undefined } | { ok: false; error: string } {
  if (!text.trim()) return { ok: true, value: undefined };
  const n = Number(text);
  return Number.isInteger(n) && n >= 200 && n <= 499 ? { ok: true, value: n } : { ok: false, error: "A whole number from 200 to 499." };
}

/**
 * "It did not happen" (release) or "It happened" (resolve) for one key, after the operator states
 * why (and, to resolve, what the result was). A key whose call is still within its lease (`inflight`)
 * may still complete: acting on it needs the operator to tick that they accept this, and is sent
 * with `force`.
 */
export function KeyActionDialog({
  action,
  scope,
  keyName,
  state,
  token,
  prefill,
  onClose,
  onDone,
}: {
  action: "release" | "resolve";
  scope: string;
  keyName: string;
  /** the key's state as the page last read it */
  state: string;
  /** the token of the reservation the page shows when the dialog opens: the decision applies to that call only */
  token?: number;
  /** where the result starts: a probe's candidate for this call, or the service's last answer */
  prefill?: { source: "probe" | "upstream"; status: number; body: string } | null;
  onClose: () => void;
  onDone: (message: string) => void;
}) {
  // the call the operator is deciding about is the one shown when the dialog opened: a page that
  // re-reads the key meanwhile may show another call by the time they confirm
  const [decidedToken] = useState(token);
  const running = state === "inflight";
  const [force, setForce] = useState(false);
  const [reason, setReason] = useState("");
  const [resultText, setResultText] = useState(prefill?.body ?? "");
  // a service's 5xx or redirect is no result status: only its body is a starting point
  const [statusText, setStatusText] = useState(prefill && prefill.status >= 200 && prefill.status <= 499 ? String(prefill.status) : "");
  const [touched, setTouched] = useState(false);
  const result = parseResult(resultText);
  const status = parseStatus(statusText);
  const valid = reasonOk(reason) && (action === "release" || (result.ok && status.ok)) && (!running || force);

  const mutation = useDecideKey(scope, keyName, (d) =>
    onDone(d.action === "release" ? "Released: the next call with this key runs the tool." : "Resolved: duplicates now get the result you entered."),
  );
  const decide = () => {
    const common = { reason, ...(running ? { force } : {}), ...(decidedToken !== undefined ? { token: decidedToken } : {}) };
    mutation.mutate(
      action === "release"
        ? { action, ...common }
        : { action, ...common, result: result.ok ? result.value : undefined, ...(status.ok && status.value !== undefined ? { status: status.value } : {}) },
    );
  };

  return (
    <Dialog open onClose={onClose} title={action === "release" ? "It did not happen: release the key" : "It happened: resolve the key"} testId={`${action}-dialog`} wide={action === "resolve"}>
      <form
        className="space-y-4"
        onSubmit={(e) => {
          e.preventDefault();
          setTouched(true);
          if (valid && !mutation.isPending) decide();
        }}
      >
        <p className="text-[13px]">
          {action === "release" ? (
            <>
              Deletes the reservation of <span className="font-mono text-[12px] break-all">{keyName}</span>; the next retry runs the tool again. Release only if
              you believe the side effect did <strong>not</strong> happen.
            </>
          ) : (
            <>
              Marks <span className="font-mono text-[12px] break-all">{keyName}</span> done with the result you enter; duplicates get it and the tool does not run
              again. Resolve only if you confirmed the side effect <strong>did</strong> happen.
            </>
          )}
        </p>
        <ReasonField value={reason} onChange={setReason} placeholder={reasonPlaceholder(action)} />
        {action === "resolve" && (
          <>
            <div className="space-y-1.5">
              <label htmlFor="resolve-result" className="block text-[13px] font-medium">
                Result <span className="font-normal text-muted">(JSON body duplicates will get)</span>
              </label>
              {prefill && (
                <p className="text-xs text-muted" data-testid="result-prefill" data-source={prefill.source}>
                  {prefill.source === "probe" ? (
                    <>Filled in from a result the tool&apos;s status probe found that may be this call&apos;s (HTTP <span className="font-mono">{prefill.status}</span>): check it before resolving.</>
                  ) : (
                    <>Filled in from the service&apos;s last answer when the outcome became unknown (HTTP <span className="font-mono">{prefill.status}</span>): check it, and enter the result duplicates should get.</>
                  )}
                </p>
              )}
              <textarea
                id="resolve-result"
                data-testid="result-input"
                rows={6}
                value={resultText}
                onChange={(e) => setResultText(e.target.value)}
                onBlur={() => setTouched(true)}
                placeholder={RESULT_PLACEHOLDER}
                spellCheck={false}
                aria-invalid={touched && !result.ok}
                aria-describedby="resolve-result-error"
                className={`${inputClass} w-full resize-y font-mono text-[12px]`}
              />
              {touched && !result.ok && (
                <p id="resolve-result-error" className="text-xs text-bad" data-testid="result-error">
                  {result.error}
                </p>
              )}
            </div>
            <div className="space-y-1.5">
              <label htmlFor="resolve-status" className="block text-[13px] font-medium">
                HTTP status <span className="font-normal text-muted">(optional, default 200)</span>
              </label>
              <input
                id="resolve-status"
                data-testid="status-input"
                inputMode="numeric"
                value={statusText}
                onChange={(e) => setStatusText(e.target.value)}
                placeholder="200"
                aria-invalid={!status.ok}
                className={`${inputClass} w-24 font-mono`}
              />
              {!status.ok && <p className="text-xs text-bad">{status.error}</p>}
            </div>
          </>
        )}
        {running && (
          <label className="flex items-start gap-2.5 rounded-lg border border-warn/40 bg-warn-soft px-3 py-2.5 text-[13px]" data-testid="force-field">
            <input
              type="checkbox"
              checked={force}
              onChange={(e) => setForce(e.target.checked)}
              className="mt-0.5 size-4 shrink-0 accent-(--warn)"
              data-testid="force-input"
            />
            <span>
              The call may still be running: {action} anyway (its late result will be flagged)
            </span>
          </label>
        )}
        {mutation.error && <ProblemAlert error={mutation.error} testId="action-error" />}
        <div className="flex justify-end gap-2">
          <button type="button" className={buttonClass("secondary")} onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className={buttonClass(action === "release" ? "danger" : "primary")} disabled={!reasonOk(reason) || (running && !force) || mutation.isPending} data-testid={`confirm-${action}`}>
            {mutation.isPending ? (action === "release" ? "Releasing…" : "Resolving…") : action === "release" ? "Release" : "Resolve"}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
