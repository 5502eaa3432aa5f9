import { z } from "zod";

/** Every action the operator audit trail records; a filter naming any other is refused, not ignored. */
export const AUDIT_ACTIONS = [
  "invoke",
  "release",
  "resolve",
  "probe",
  "probe_late",
  "bulk_release",
  "acknowledge_anomaly",
  "resolve_anomaly",
  "reopen_anomaly",
  "confirm_genuine_repeat",
  "confirm_duplicate",
  "reconcile",
  "token_create",
  "token_revoke",
  "operator_disable",
  "operator_enable",
  "tool_pause",
  "tool_resume",
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

const DAY_MS = 86_400_000;
const DATE_ONLY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * A date as the console's date field sends it (YYYY-MM-DD, a UTC day, as every console time is
 * shown in UTC) or an ISO 8601 instant. `end` turns a day into the first instant after it, so
 * "to 2026-03-10" includes all of that day.
 */
function instant(end: boolean) {
  return z
    .string()
    .trim()
    .transform((text, ctx) => {
      const dateOnly = DATE_ONLY.test(text);
      const ms = dateOnly ? Date.parse(`${text}T00:00:00Z`) : /^\d{4}-\d{2}-\d{2}T/.test(text) ? Date.parse(text) : NaN;
      // Date.parse rolls 2026-02-30 over into March: a day must read back as itself
      if (Number.isNaN(ms) || (dateOnly && new Date(ms).toISOString().slice(0, 10) !== text)) {
        ctx.addIssue({ code: "custom", message: `${JSON.stringify(text)} is not a date: use YYYY-MM-DD or an ISO 8601 time` });
        return z.NEVER;
      }
      return new Date(dateOnly && end ? ms + DAY_MS : ms);
    });
}

const text = (max: number) => z.string().trim().min(1).max(max);

const fields = z.object({
    /** from this day (inclusive) or instant */
    from: instant(false).optional(),
    /** to this day (inclusive) or before this instant */
    to: instant(true).optional(),
    actor: text(320).optional(),
    action: z
      .string()
      .trim()
      .refine((a): a is AuditAction => (AUDIT_ACTIONS as readonly string[]).includes(a), {
        error: (i) => `unknown action ${JSON.stringify(i.input)}: one of ${AUDIT_ACTIONS.join(", ")}`,
      })
      .optional(),
    /** a key, a scope or an anomaly id the action touched */
    target: text(1_000).optional(),
    scope: text(64).optional(),
    key: text(1_000).optional(),
});

function rangeInOrder(f: { from?: Date; to?: Date }) {
  return !f.from || !f.to || f.from < f.to;
}
const RANGE_REVERSED = { message: "the date range ends before it starts", path: ["to"] };

/** The audit trail's filters, as the page's URL takes them; all apply at once. */
export const auditTrailFiltersSchema = fields.refine(rangeInOrder, RANGE_REVERSED);

/** GET /api/v1/audit's query: the filters and a page. */
export const auditTrailQuerySchema = fields
  .extend({
    limit: z.coerce.number().int().min(1).max(200).default(50),
    /** the previous page's nextCursor */
    cursor: z.string().max(200).optional(),
  })
  .refine(rangeInOrder, RANGE_REVERSED);

export type AuditTrailFilters = z.output<typeof auditTrailFiltersSchema>;

export type ParsedAuditTrailFilters =
  | { ok: true; filters: AuditTrailFilters }
  | { ok: false; problems: { field: string; message: string }[] };

/** The filters of a URL's query (empty values are no filter); what is wrong is said field by field. */
export function parseAuditTrailFilters(raw: Record<string, string | undefined>): ParsedAuditTrailFilters {
  const given = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined && v.trim() !== ""));
  const parsed = auditTrailFiltersSchema.safeParse(given);
  if (parsed.success) return { ok: true, filters: parsed.data };
  return { ok: false, problems: parsed.error.issues.map((i) => ({ field: i.path.join(".") || "filters", message: i.message })) };
}
