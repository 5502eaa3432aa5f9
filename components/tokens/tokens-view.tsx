"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import clsx from "clsx";
import { useState } from "react";
import { CopyButton } from "@/components/docs/copy-button";
import { Dialog } from "@/components/ui/dialog";
import { ProblemAlert } from "@/components/ui/problem-alert";
import { ReasonDialog } from "@/components/ui/reason-dialog";
import { buttonClass, inputClass } from "@/components/ui/styles";
import { TableHead } from "@/components/ui/table-head";
import { apiFetch } from "@/lib/console/api";
import { formatTimestamp } from "@/lib/console/format";
import { SCOPE_PATTERN } from "@/lib/idempotency/key-rules";

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

interface CreatedToken {
  id: string;
  token: string;
  scope: string;
  prefix: string;
  advisoryKeys: boolean;
}

const TOKENS_QUERY = ["tokens"];

/** The API tokens page: every token of the deployment, newest first; create one, revoke one. */
export function TokensView({ initialTokens }: { initialTokens: TokenRow[] }) {
  const queryClient = useQueryClient();
  const { data } = useQuery({
    queryKey: TOKENS_QUERY,
    queryFn: () => apiFetch<{ tokens: TokenRow[] }>("/api/v1/tokens").then((r) => r.tokens),
    initialData: initialTokens,
  });
  const [creating, setCreating] = useState(false);
  const [revoking, setRevoking] = useState<TokenRow | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const refresh = () => queryClient.invalidateQueries({ queryKey: TOKENS_QUERY });
  const tokens = data ?? [];
  const active = tokens.filter((t) => !t.revokedAt).length;

  return (
    <div className="space-y-4">
      <div className="flex flex-wrap items-end justify-between gap-3">
        <div className="min-w-0">
          <h1 className="text-xl font-semibold tracking-tight">API tokens</h1>
          <p className="mt-1 max-w-2xl text-muted">
            Callers send a token as <code className="font-mono text-[12px]">Authorization: Bearer …</code>; its scope is the tenant their keys live in.
            A token is shown once when it is created and stored only as a hash. Creating and revoking are recorded in the audit trail.
          </p>
        </div>
        <button type="button" className={buttonClass("primary")} onClick={() => setCreating(true)} data-testid="create-token">
          Create token
        </button>
      </div>
      {notice && (
        <p role="status" data-testid="tokens-notice" className="rounded-lg border border-ok/30 bg-ok-soft px-4 py-2.5 text-[13px]">
          {notice}
        </p>
      )}
      {tokens.length === 0 ? (
        <div data-testid="tokens-empty" className="rounded-xl border border-dashed border-line-strong px-6 py-10 text-center">
          <p className="font-medium">No API tokens yet.</p>
          <p className="mt-1 text-[13px] text-muted">Create one for each caller or tenant; it is shown once.</p>
        </div>
      ) : (
        <>
          <p className="text-[13px] text-muted" data-testid="tokens-count">
            {active} active, {tokens.length - active} revoked
          </p>
          <TokenCards tokens={tokens} onRevoke={setRevoking} />
          <TokenTable tokens={tokens} onRevoke={setRevoking} />
          <p className="text-xs text-muted" data-testid="keys-kind-legend">
            Keys: <span className="font-medium text-fg">authoritative</span> keys come from the orchestrator, one per action, and are trusted as
            sent; <span className="font-medium text-fg">advisory</span> keys come from a model, so a call is also matched by its arguments within
            the tool&apos;s fallback dedupe window.
          </p>
        </>
      )}
      {creating && (
        <CreateTokenDialog
          onClose={() => setCreating(false)}
          onCreated={() => {
            setNotice(null);
            void refresh();
          }}
        />
      )}
      {revoking && (
        <RevokeTokenDialog
          token={revoking}
          onClose={() => setRevoking(null)}
          onDone={() => {
            setNotice(`Revoked ${revoking.label ?? revoking.prefix + "…"}: calls with it are refused with 401 from now on (other server processes within 5 s).`);
            setRevoking(null);
            void refresh();
          }}
        />
      )}
    </div>
  );
}

function Status({ token }: { token: TokenRow }) {
  return token.revokedAt ? (
    <span className="inline-flex rounded-full bg-surface-2 px-2 py-0.5 text-xs font-medium text-muted" title={`revoked ${formatTimestamp(token.revokedAt)}`}>
      revoked
    </span>
  ) : (
    <span className="inline-flex rounded-full bg-ok-soft px-2 py-0.5 text-xs font-medium text-ok">active</span>
  );
}

function KeysKind({ advisory }: { advisory: boolean }) {
  return advisory ? (
    <span title="Keys sent with this token come from a model: also checked by the tool's arguments window">advisory</span>
  ) : (
    <span className="text-muted" title="Keys sent with this token come from the orchestrator and are never matched by arguments">authoritative</span>
  );
}

function RevokeButton({ token, onRevoke }: { token: TokenRow; onRevoke: (t: TokenRow) => void }) {
  if (token.revokedAt) return <span className="text-xs text-muted">{formatTimestamp(token.revokedAt)}</span>;
  return (
    <button type="button" className={buttonClass("secondary", "sm")} onClick={() => onRevoke(token)} data-testid="revoke-token" aria-label={`Revoke ${token.label ?? token.prefix}`}>
      Revoke
    </button>
  );
}

/** Below the sm breakpoint: one card per token. */
function TokenCards({ tokens, onRevoke }: { tokens: TokenRow[]; onRevoke: (t: TokenRow) => void }) {
  return (
    <ul className="divide-y divide-line rounded-xl border border-line bg-surface shadow-xs sm:hidden">
      {tokens.map((t) => (
        <li key={t.id} data-testid="token-card" data-id={t.id} data-scope={t.scope} className={clsx("space-y-1.5 px-4 py-3", t.revokedAt && "opacity-70")}>
          <div className="flex items-center justify-between gap-3">
            <span className="min-w-0 truncate font-medium">{t.label ?? <span className="text-muted">no label</span>}</span>
            <Status token={t} />
          </div>
          <p className="flex flex-wrap items-center gap-x-2 text-xs text-muted">
            <span className="font-mono text-[12px] text-fg">{t.scope}</span>
            <span aria-hidden="true">·</span>
            <span className="font-mono text-[12px]">{t.prefix}…</span>
            <span aria-hidden="true">·</span>
            <KeysKind advisory={t.advisoryKeys} />
          </p>
          <p className="text-xs text-muted">
            Created {formatTimestamp(t.createdAt)} · last used {t.lastUsedAt ? formatTimestamp(t.lastUsedAt) : "never"}
          </p>
          {!t.revokedAt && (
            <div className="pt-1">
              <RevokeButton token={t} onRevoke={onRevoke} />
            </div>
          )}
        </li>
      ))}
    </ul>
  );
}

function TokenTable({ tokens, onRevoke }: { tokens: TokenRow[]; onRevoke: (t: TokenRow) => void }) {
  return (
    <div className="hidden overflow-x-auto rounded-xl border border-line bg-surface shadow-xs sm:block">
      <table className="w-full min-w-[840px] text-[13px]" data-testid="tokens-table">
        <TableHead
          columns={[{ label: "Token" }, { label: "Scope" }, { label: "Keys" }, { label: "Created" }, { label: "Last used" }, { label: "Status" }, { label: <span className="sr-only">Actions</span> }]}
        />
        <tbody className="divide-y divide-line">
          {tokens.map((t) => (
            <tr key={t.id} data-testid="token-row" data-id={t.id} data-scope={t.scope} data-status={t.revokedAt ? "revoked" : "active"} className={clsx("align-middle", t.revokedAt && "text-muted")}>
              <td className="max-w-[16rem] px-5 py-2.5">
                <div className="truncate font-medium" title={t.label ?? undefined}>
                  {t.label ?? <span className="font-normal text-muted">no label</span>}
                </div>
                <div className="font-mono text-[11.5px] text-faint">{t.prefix}…</div>
              </td>
              <td className="max-w-[14rem] truncate px-3 py-2.5 font-mono text-[12.5px]" title={t.scope}>
                {t.scope}
              </td>
              <td className="px-3 py-2.5">
                <KeysKind advisory={t.advisoryKeys} />
              </td>
              <td className="px-3 py-2.5 whitespace-nowrap">
                <time dateTime={t.createdAt}>{formatTimestamp(t.createdAt)}</time>
              </td>
              <td className="px-3 py-2.5 whitespace-nowrap" data-testid="token-last-used">
                {t.lastUsedAt ? <time dateTime={t.lastUsedAt}>{formatTimestamp(t.lastUsedAt)}</time> : <span className="text-muted">never</span>}
              </td>
              <td className="px-3 py-2.5">
                <Status token={t} />
              </td>
              <td className="px-5 py-2.5 text-right">
                <RevokeButton token={t} onRevoke={onRevoke} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The form, then the new token once: the only time its secret is shown. */
function CreateTokenDialog({ onClose, onCreated }: { onClose: () => void; onCreated: () => void }) {
  const [scope, setScope] = useState("");
  const [label, setLabel] = useState("");
  const [advisoryKeys, setAdvisoryKeys] = useState(false);
  const [touched, setTouched] = useState(false);
  const scopeOk = SCOPE_PATTERN.test(scope);
  const mutation = useMutation({
    mutationFn: () => apiFetch<CreatedToken>("/api/v1/tokens", { method: "POST", json: { scope, ...(label.trim() ? { label: label.trim() } : {}), advisoryKeys } }),
    onSuccess: onCreated,
  });
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
          if (scopeOk && !mutation.isPending) mutation.mutate();
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

function RevokeTokenDialog({ token, onClose, onDone }: { token: TokenRow; onClose: () => void; onDone: () => void }) {
  const mutation = useMutation({
    mutationFn: (reason: string) => apiFetch(`/api/v1/tokens/${encodeURIComponent(token.id)}/revoke`, { method: "POST", json: { reason } }),
    onSuccess: onDone,
  });
  return (
    <ReasonDialog
      title="Revoke this API token"
      testId="revoke-token-dialog"
      onClose={onClose}
      onConfirm={(reason) => mutation.mutate(reason)}
      pending={mutation.isPending}
      error={mutation.error}
      confirm={{ label: "Revoke", pendingLabel: "Revoking…", testId: "confirm-revoke-token", tone: "danger" }}
      reasonId="revoke-reason"
      errorTestId="revoke-token-error"
    >
      <p className="text-[13px]">
        Calls with <span className="font-mono text-[12px]">{token.prefix}…</span>
        {token.label && <> ({token.label})</>} in scope <span className="font-mono text-[12px]">{token.scope}</span> are refused with 401 from now on. Its keys and
        their results stay. This cannot be undone: the caller needs a new token.
      </p>
    </ReasonDialog>
  );
}
