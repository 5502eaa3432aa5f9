/**
 * Example text in an operator decision's fields: it describes the decision being taken (never the
 * opposite one) and no particular kind of tool (a ledger entry is not a charge).
 */
export function reasonPlaceholder(action: "release" | "resolve"): string {
  return action === "release"
    ? "e.g. checked the downstream system: this key's action did not happen"
    : "e.g. checked the downstream system: this key's action happened";
}

/** The result field's example: the tool's own answer, as JSON, whatever the tool */
export const RESULT_PLACEHOLDER = "the result the tool returned for this call, as JSON";
