import Link from "next/link";
import { buttonClass, inputClass } from "@/components/ui/styles";

export type AuditFilterValues = Partial<Record<"from" | "to" | "actor" | "action" | "target" | "scope" | "key", string>>;

const label = "block text-xs font-medium text-muted";

/**
 * A plain GET form: the filters live in the URL, apply together on one Apply, and work without
 * JavaScript. Values are shown as the URL has them, even ones the page refused, so they can be corrected.
 */
export function AuditFilters({ actors, actions, values }: { actors: string[]; actions: string[]; values: AuditFilterValues }) {
  const { from, to, actor, action, target, scope, key } = values;
  const any = from || to || actor || action || target || scope;
  return (
    <form
      method="get"
      action="/audit"
      role="search"
      aria-label="Filter the audit trail"
      className="grid grid-cols-2 items-end gap-3 rounded-xl border border-line bg-surface px-4 py-3 shadow-xs md:flex md:flex-wrap"
    >
      {scope && <input type="hidden" name="scope" value={scope} />}
      {scope && key && <input type="hidden" name="key" value={key} />}
      <div className="space-y-1">
        <label htmlFor="audit-from" className={label}>From (UTC)</label>
        <input id="audit-from" name="from" type="date" defaultValue={from ?? ""} className={`${inputClass} w-full md:w-40`} data-testid="audit-filter-from" />
      </div>
      <div className="space-y-1">
        <label htmlFor="audit-to" className={label}>To (UTC)</label>
        <input id="audit-to" name="to" type="date" defaultValue={to ?? ""} className={`${inputClass} w-full md:w-40`} data-testid="audit-filter-to" />
      </div>
      <div className="space-y-1">
        <label htmlFor="audit-actor" className={label}>Actor</label>
        <select id="audit-actor" name="actor" defaultValue={actor ?? ""} className={`${inputClass} w-full md:w-auto`} data-testid="audit-filter-actor">
          <option value="">Anyone</option>
          {[...new Set([...actors, ...(actor ? [actor] : [])])].map((a) => (
            <option key={a} value={a}>{a}</option>
          ))}
        </select>
      </div>
      <div className="space-y-1">
        <label htmlFor="audit-action" className={label}>Action</label>
        <select id="audit-action" name="action" defaultValue={action ?? ""} className={`${inputClass} w-full md:w-auto`} data-testid="audit-filter-action">
          <option value="">Any action</option>
          {[...new Set([...actions, ...(action ? [action] : [])])].map((a) => (
            <option key={a} value={a}>{a.replace(/_/g, " ")}</option>
          ))}
        </select>
      </div>
      <div className="col-span-2 min-w-48 space-y-1 md:flex-1">
        <label htmlFor="audit-target" className={label}>Target</label>
        <input
          id="audit-target"
          name="target"
          type="search"
          defaultValue={target ?? ""}
          placeholder="key, scope or anomaly id"
          className={`${inputClass} w-full font-mono`}
          autoComplete="off"
          spellCheck={false}
          data-testid="audit-filter-target"
        />
      </div>
      <div className="col-span-2 flex gap-2">
        <button type="submit" className={buttonClass("primary")} data-testid="audit-apply">Apply</button>
        {any && (
          <Link href="/audit" className={buttonClass("ghost")} data-testid="audit-clear">Clear</Link>
        )}
      </div>
    </form>
  );
}
