import clsx from "clsx";
import type { ReactNode } from "react";

export interface TableColumn {
  label: ReactNode;
  /** figures are right-aligned */
  align?: "right";
}

/**
 * The header row of the console's data tables inside a card: the first and last columns padded to
 * the card's edge, the others closer. `rule` draws the line above the header as well (a table
 * under a card's text rather than at its top).
 */
export function TableHead({ columns, rule = "bottom" }: { columns: readonly TableColumn[]; rule?: "bottom" | "both" }) {
  return (
    <thead>
      <tr className={clsx(rule === "both" ? "border-y" : "border-b", "border-line text-left text-xs text-muted")}>
        {columns.map((column, i) => (
          <th
            key={i}
            scope="col"
            className={clsx(i === 0 || i === columns.length - 1 ? "px-5" : "px-3", "py-2 font-medium", column.align === "right" && "text-right")}
          >
            {column.label}
          </th>
        ))}
      </tr>
    </thead>
  );
}
