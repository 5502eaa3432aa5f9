"use client";

import clsx from "clsx";
import { useState } from "react";
import { CopyButton } from "@/components/docs/copy-button";
import { Dialog } from "@/components/ui/dialog";
import { ProblemAlert } from "@/components/ui/problem-alert";
import { buttonClass, inputClass } from "@/components/ui/styles";
import { useCreateToken } from "@/lib/console/queries/tokens";
import { SCOPE_PATTERN } from "@/lib/idempotency/key-rules";

/** The form, then the new token once: the only time its secret is shown. */
export function CreateTokenDialog({ onClose, onCreated }: { onClose: () => void; onCreated: () => void }) {
  const [scope, setScope] = useState("");
  const [label, setLabel] = useState("");
  const [advisoryKeys, setAdvisoryKeys] = useState(false);
  const [touched, setTouched] = useState(false);
  const scopeOk = SCOPE_PATTERN.test(scope);
  const mutation = useCreateToken(onCreated);
  const created = mutation.data;

  if (created) {
    const origin = typeof window === "undefined" ? "" : window.location.origin;
    return (
      <Dialog open onClose={onClose} title="Copy the new token now" testId="token-created-dialog" wide>
        <div className="space-y-4">
          <p className="rounded-lg border border-warn/40 bg-warn-soft px-3 py-2.5 text-[13px]">
            This is the only time the token is shown: Idemgate keeps only its hash. Store it in your caller&apos;s secret store now; if it is lost, revoke it and create
            another.
          </p>
          <div className="space-y-1.5">
            <div className="flex items-center justify-between gap-2">
              <span className="text-[13px] font-medium">
                Token for scope <span className="font-mono text-[12px]">{created.scope}</span>
                {created.advisoryKeys && <span className="font-normal text-muted"> (advisory keys)</span>}
              </span>
              <CopyButton text={created.token} label="Copy token" />
            </div>
            <code data-testid="new-token" className="block rounded-md border border-line bg-surface-2 px-3 py-2 font-mono text-[12.5px] break-all select-all">
              {created.token}
            </code>
          </div>
          <div className="space-y-1.5">
            <p className="text-[13px] font-medium">Try it</p>
            <pre tabIndex={0} className="overflow-x-auto rounded-md border border-line bg-surface-2 px-3 py-2 font-mono text-[12px]">
              {`curl -s ${origin}/api/v1/tools \\\n  -H "Authorization: Bearer ${created.token}"`}
            </pre>
          </div>
          <div className="flex justify-end">
            <button type="button" className={buttonClass("primary")} onClick={onClose} data-testid="token-created-done">
              Done
            </button>
          </div>
        </div>
      </Dialog>
    );
  }

  return (
    <Dialog open onClose={onClose} title="Create an API token" testId="create-token-dialog">
      <form
        className="space-y-4"
        onSubmit={(e) => {
          e.preventDefault();
          setTouched(true);
          if (scopeOk && !mutation.isPending) mutation.mutate({ scope, ...(label.trim() ? { label: label.trim() } : {}), advisoryKeys });
        }}
      >
        <div className="space-y-1.5">
          <label htmlFor="token-scope" className="block text-[13px] font-medium">
            Scope <span className="font-normal text-muted">(the tenant its keys live in)</span>
          </label>
          <input
            id="token-scope"
            data-testid="token-scope"
            required
            maxLength={64}
            value={scope}
            onChange={(e) => setScope(e.target.value)}
            onBlur={() => setTouched(true)}
            placeholder="e.g. acme-prod"
            autoComplete="off"
            spellCheck={false}
            aria-invalid={touched && !scopeOk}
            aria-describedby="token-scope-hint"
            className={`${inputClass} w-full font-mono`}
          />
          <p id="token-scope-hint" className={clsx("text-xs", touched && !scopeOk ? "text-bad" : "text-muted")} data-testid="token-scope-hint">
            1–64 letters, digits, &apos;.&apos;, &apos;_&apos; or &apos;-&apos;, starting with a letter or digit. Keys never cross scopes.
          </p>
        </div>
        <div className="space-y-1.5">
          <label htmlFor="token-label" className="block text-[13px] font-medium">
            Label <span className="font-normal text-muted">(optional: what or who it is for)</span>
          </label>
          <input
            id="token-label"
            data-testid="token-label"
            maxLength={200}
            value={label}
            onChange={(e) => setLabel(e.target.value)}
            placeholder="e.g. billing agent, production"
            autoComplete="off"
            className={`${inputClass} w-full`}
          />
        </div>
        <label className="flex items-start gap-2.5 text-[13px]">
          <input type="checkbox" checked={advisoryKeys} onChange={(e) => setAdvisoryKeys(e.target.checked)} className="mt-0.5 size-4 shrink-0" data-testid="token-advisory" />
          <span>
            Advisory keys
            <span className="block text-xs text-muted">For callers whose keys a model mints: an identical call under a fresh key within the tool&apos;s window is answered as a duplicate.</span>
          </span>
        </label>
        {mutation.error && <ProblemAlert error={mutation.error} testId="create-token-error" />}
        <div className="flex justify-end gap-2">
          <button type="button" className={buttonClass("secondary")} onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className={buttonClass("primary")} disabled={mutation.isPending} data-testid="confirm-create-token">
            {mutation.isPending ? "Creating…" : "Create token"}
          </button>
        </div>
      </form>
    </Dialog>
  );
}
