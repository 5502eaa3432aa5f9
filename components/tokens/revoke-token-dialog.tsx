"use client";

import { ReasonDialog } from "@/components/ui/reason-dialog";
import { useRevokeToken, type TokenRow } from "@/lib/console/queries/tokens";

export function RevokeTokenDialog({ token, onClose, onDone }: { token: TokenRow; onClose: () => void; onDone: () => void }) {
  const mutation = useRevokeToken(token.id, onDone);
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
