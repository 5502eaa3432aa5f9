"use client";

import clsx from "clsx";
import { buttonClass } from "@/components/ui/styles";
import { TableHead } from "@/components/ui/table-head";
import { formatTimestamp } from "@/lib/console/format";
import type { TokenRow } from "@/lib/console/queries/tokens";

// The tokens as a list: one card per token on a phone, a table from the sm breakpoint on.

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
export function TokenCards({ tokens, onRevoke }: { tokens: TokenRow[]; onRevoke: (t: TokenRow) => void }) {
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

export function TokenTable({ tokens, onRevoke }: { tokens: TokenRow[]; onRevoke: (t: TokenRow) => void }) {
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
