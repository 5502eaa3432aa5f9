import type { ToolDefinition } from "../define-tool";
import * as email from "./email";
import * as ledger from "./ledger";
import * as payments from "./payments";
import * as tickets from "./tickets";

const families = [payments, email, tickets, ledger];

/**
 * IDEMGATE_DEMO_LEASE_MS shortens the demo write tools' lease, so a simulated crash shows up as a
 * stuck key in seconds instead of a minute (demos, browser tests).
 */
function demoLeaseMs(): number | undefined {
  const raw = process.env.IDEMGATE_DEMO_LEASE_MS;
  if (!raw) return undefined;
  const ms = Number(raw);
  if (!Number.isInteger(ms) || ms <= 0) throw new Error(`IDEMGATE_DEMO_LEASE_MS must be a positive whole number of milliseconds, not "${raw}"`);
  return ms;
}

/** The built-in demo tools: they make the product useful on first start. */
export const demoTools: readonly ToolDefinition[] = (() => {
  const leaseMs = demoLeaseMs();
  const tools = families.flatMap((family) => family.tools);
  return leaseMs ? tools.map((tool) => (tool.kind === "write" ? { ...tool, leaseMs } : tool)) : tools;
})();
