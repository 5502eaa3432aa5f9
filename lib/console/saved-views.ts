import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { PrismaClient } from "@/generated/prisma/client";
import { ANOMALY_TYPES } from "@/lib/anomalies/anomaly-types";
import { isUniqueViolation } from "@/lib/db/errors";
import { InvalidArgumentsError } from "@/lib/idempotency/errors";
import { KEY_STATES } from "@/lib/idempotency/record";
import { LimitReachedError, NameTakenError, notFound } from "@/lib/http/problem";

/**
 * Saved views: a named filter of the Keys or Anomalies list, kept per operator. A view is the
 * list's query string reduced to the parameters that page filters by, so applying one is opening
 * `/<page>?<query>`; it never holds a cursor, so it always starts at the newest rows. Only its owner
 * lists, renames or deletes it: another operator's view id is answered like one that does not exist.
 */

export const VIEW_PAGES = ["keys", "anomalies"] as const;
export type ViewPage = (typeof VIEW_PAGES)[number];

export const MAX_VIEWS_PER_PAGE = 50;
export const MAX_VIEW_NAME_LENGTH = 80;
const MAX_QUERY_LENGTH = 2000;
const MAX_VALUE_LENGTH = 255;

export interface SavedView {
  id: string;
  page: ViewPage;
  name: string;
  /** the filter, e.g. `state=stuck&tool=payments.charge`; empty for the page's default list */
  query: string;
  createdAt: string;
  updatedAt: string;
}

/** How one parameter of a page's filter is checked: a message when the value is refused. */
type Check = (value: string) => string | null;

const text: Check = (v) => (v.length > MAX_VALUE_LENGTH ? `at most ${MAX_VALUE_LENGTH} characters` : null);
const oneOf =
  (values: readonly string[]): Check =>
  (v) =>
    values.includes(v) ? null : `must be one of ${values.join(", ")}`;

/**
 * The parameters each page filters by, in the order a normalised query lists them, and the values
 * each takes. Anomalies' default status (open) is the absence of the parameter, as in its URL.
 */
const PAGE_FILTERS: Record<ViewPage, Record<string, Check>> = {
  keys: { state: oneOf(KEY_STATES), tool: text, scope: text, prefix: text },
  anomalies: { status: oneOf(["acknowledged", "resolved", "any"]), type: oneOf(ANOMALY_TYPES), tool: text },
};
const DEFAULT_VALUES: Partial<Record<ViewPage, Record<string, string>>> = { anomalies: { status: "open" } };

/**
 * A page's query string reduced to its filter: its own parameters only (cursors, page sizes and
 * anything else dropped), each once, trimmed, empty or default values left out, in a fixed order.
 */
export function normaliseViewQuery(page: ViewPage, query: string): string {
  const given = new URLSearchParams(query.trim().replace(/^\?/, ""));
  const out = new URLSearchParams();
  const issues: { path: string; message: string }[] = [];
  for (const [param, check] of Object.entries(PAGE_FILTERS[page])) {
    const value = given.get(param)?.trim() ?? "";
    if (value === "" || DEFAULT_VALUES[page]?.[param] === value) continue;
    const problem = check(value);
    if (problem) issues.push({ path: `query.${param}`, message: `${JSON.stringify(value.slice(0, 40))} is not a ${page} filter value: ${problem}` });
    else out.set(param, value);
  }
  if (issues.length) throw new InvalidArgumentsError(`invalid view: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`, issues);
  return out.toString();
}

const name = z
  .string({ error: "a name is required" })
  .trim()
  .min(1, "a name needs at least one character other than spaces")
  .max(MAX_VIEW_NAME_LENGTH, `a name has at most ${MAX_VIEW_NAME_LENGTH} characters`);
const query = z.string({ error: "the filter must be a query string" }).max(MAX_QUERY_LENGTH, `the filter has at most ${MAX_QUERY_LENGTH} characters`);
const page = z.enum(VIEW_PAGES, { error: `the page must be one of ${VIEW_PAGES.join(", ")}` });

/** GET /api/v1/console/views?page=… */
export const listViewsQuery = z.object({ page });
const createInput = z.object({ page, name, query: query.default("") });
const updateInput = z.object({ name: name.optional(), query: query.optional() }).refine((v) => v.name !== undefined || v.query !== undefined, {
  message: "send a new name, a new query, or both",
});

function parse<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((i) => ({ path: i.path.length ? i.path.join(".") : "(body)", message: i.message }));
  throw new InvalidArgumentsError(`invalid view: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`, issues);
}

const nameTaken = (n: string) => new NameTakenError(`you already have a view named ${JSON.stringify(n)} on this page: choose another name`);

function present(row: { id: string; page: string; name: string; query: string; createdAt: Date; updatedAt: Date }): SavedView {
  return { id: row.id, page: row.page as ViewPage, name: row.name, query: row.query, createdAt: row.createdAt.toISOString(), updatedAt: row.updatedAt.toISOString() };
}

/** The operator's own views of one page, by name. */
export async function listSavedViews(prisma: PrismaClient, operatorId: string, viewPage: ViewPage): Promise<SavedView[]> {
  const rows = await prisma.savedView.findMany({ where: { operatorId, page: viewPage } });
  return rows.map(present).sort((a, b) => a.name.localeCompare(b.name, "en", { sensitivity: "base" }) || a.name.localeCompare(b.name));
}

/** A new view `{ page, name, query }` of the operator's; 409 when the name is taken or the page already has MAX_VIEWS_PER_PAGE. */
export async function createSavedView(prisma: PrismaClient, operatorId: string, input: unknown): Promise<SavedView> {
  const v = parse(createInput, input);
  const normalised = normaliseViewQuery(v.page, v.query);
  try {
    const row = await prisma.$transaction(async (tx) => {
      // one create at a time per operator, so two at once cannot both pass the cap
      await tx.$queryRaw`SELECT id FROM operators WHERE id = ${operatorId} FOR UPDATE`;
      const count = await tx.savedView.count({ where: { operatorId, page: v.page } });
      if (count >= MAX_VIEWS_PER_PAGE) {
        throw new LimitReachedError(`you already have ${MAX_VIEWS_PER_PAGE} saved views on this page, the most one operator keeps: delete one first`);
      }
      const now = new Date();
      return tx.savedView.create({ data: { id: randomUUID(), operatorId, page: v.page, name: v.name, query: normalised, createdAt: now, updatedAt: now } });
    });
    return present(row);
  } catch (err) {
    if (isUniqueViolation(err)) throw nameTaken(v.name);
    throw err;
  }
}

/** Renames a view of the operator's and/or replaces its filter; 404 for a view that is not theirs. */
export async function updateSavedView(prisma: PrismaClient, operatorId: string, id: string, input: unknown): Promise<SavedView> {
  const v = parse(updateInput, input);
  const existing = await prisma.savedView.findFirst({ where: { id, operatorId } });
  if (!existing) throw notFound("you have no saved view with this id");
  const data = {
    ...(v.name !== undefined ? { name: v.name } : {}),
    ...(v.query !== undefined ? { query: normaliseViewQuery(existing.page as ViewPage, v.query) } : {}),
    updatedAt: new Date(),
  };
  try {
    const { count } = await prisma.savedView.updateMany({ where: { id, operatorId }, data });
    if (count === 0) throw notFound("you have no saved view with this id");
  } catch (err) {
    if (isUniqueViolation(err)) throw nameTaken(v.name ?? existing.name);
    throw err;
  }
  return present({ ...existing, ...data });
}

/** Deletes a view of the operator's; 404 for a view that is not theirs. */
export async function deleteSavedView(prisma: PrismaClient, operatorId: string, id: string): Promise<void> {
  const { count } = await prisma.savedView.deleteMany({ where: { id, operatorId } });
  if (count === 0) throw notFound("you have no saved view with this id");
}
