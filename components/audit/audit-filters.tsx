import Link from "next/link";
import { buttonClass, inputClass } from "@/components/ui/styles";

/** A plain GET form: filters live in the URL and work without JavaScript. */
export function AuditFilters({ actors, actions, actor, action, scope, keyName }: { actors: string[]; actions: string[]; actor?: string; action?: string; scope?: string; keyName?: string }) {
  return (
    <form method="get" action="/audit" role="search" aria-label="Filter the audit trail" className="flex flex-wrap items-end gap-3 rounded-xl border border-line bg-surface px-4 py-3 shadow-xs">
      {scope && <input type="hidden" name="scope" value={scope} />}
      {scope && keyName && <input type="hidden" name="key" value={keyName} />}
      <div className="space-y-1">
        <label htmlFor="audit-actor" className="block text-xs font-medium text-muted">Actor</label>
        <select id="audit-actor" name="actor" defaultValue={actor ?? ""} className={inputClass} data-testid="audit-filter-actor">
          <option value="">Anyone</option>
          {[...new Set([...actors, ...(actor ? [actor] : [])])].map((a) => (
            <option key={a} value={a}>{a}</option>
          ))}
        </select>
      </div>
      <div className="space-y-1">
        <label htmlFor="audit-action" className="block text-xs font-medium text-muted">Action</label>
        <select id="audit-action" name="action" defaultValue={action ?? ""} className={inputClass} data-testid="audit-filter-action">
          <option value="">Any action</option>
          {[...new Set([...actions, ...(action ? [action] : [])])].map((a) => (
            <option key={a} value={a}>{a.replace(/_/g, " ")}</option>
          ))}
        </select>
      </div>
      <button type="submit" className={buttonClass("secondary")} data-testid="audit-apply">Apply</button>
      {(actor || action) && (
        <Link href="/audit" className={buttonClass("ghost")}>Clear</Link>
      )}
    </form>
  );
}
