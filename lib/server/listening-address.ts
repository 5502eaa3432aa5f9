import { isIP } from "node:net";

/**
 * Whether this server process listens on a loopback address only (HOST or `-H` 127.0.0.1, ::1 or
 * localhost), as scripts/serve.mjs reports once it listens. False when it listens on every
 * interface or another address, and where no such report exists (`next dev`, tests that serve the
 * routes themselves): the names it is reached by are then not known here.
 */
export function listensOnLoopbackOnly(): boolean {
  const address = (globalThis as unknown as { __idemgateAddress?: unknown }).__idemgateAddress;
  if (!address || typeof address !== "object") return false;
  return isLoopbackAddress(String((address as { address?: unknown }).address ?? ""));
}

export function isLoopbackAddress(address: string): boolean {
  const ip = address.replace(/^::ffff:/i, "");
  if (isIP(ip) === 4) return ip.startsWith("127.");
  return ip === "::1";
}
