"use client";

import { useState } from "react";
import { buttonClass } from "@/components/ui/styles";
import { useTokens, type TokenRow } from "@/lib/console/queries/tokens";
import { CreateTokenDialog } from "./create-token-dialog";
import { RevokeTokenDialog } from "./revoke-token-dialog";
import { TokenCards, TokenTable } from "./token-list";

/** The API tokens page: every token of the deployment, newest first; create one, revoke one. */
export function TokensView({ initialTokens }: { initialTokens: TokenRow[] }) {
  const { data } = useTokens(initialTokens);
  const [creating, setCreating] = useState(false);
  const [revoking, setRevoking] = useState<TokenRow | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
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
          onCreated={() => setNotice(null)}
        />
      )}
      {revoking && (
        <RevokeTokenDialog
          token={revoking}
          onClose={() => setRevoking(null)}
          onDone={() => {
            setNotice(`Revoked ${revoking.label ?? revoking.prefix + "…"}: calls with it are refused with 401 from now on (other server processes within 5 s).`);
            setRevoking(null);
          }}
        />
      )}
    </div>
  );
}
