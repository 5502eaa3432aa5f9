/** The simulator floods a server with charges and crashes: it must never be pointed at a stranger. */
export class SimulationTargetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SimulationTargetError";
  }
}

function isLoopback(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return host === "localhost" || host.endsWith(".localhost") || host === "::1" || /^127(\.\d{1,3}){3}$/.test(host);
}

/**
 * The gateway's origin, if the simulator may talk to it: a loopback address, or one of the
 * `allowedOrigins` (the configured server, e.g. $IDEMGATE_URL).
 */
export function simulationTarget(url: string, allowedOrigins: readonly string[] = []): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new SimulationTargetError(`--url ${JSON.stringify(url)} is not a URL (e.g. http://127.0.0.1:3000)`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new SimulationTargetError(`--url must be http or https, not ${parsed.protocol}`);
  const allowed = allowedOrigins.flatMap((o) => {
    try {
      return [new URL(o).origin];
    } catch {
      return [];
    }
  });
  if (!isLoopback(parsed.hostname) && !allowed.includes(parsed.origin)) {
    throw new SimulationTargetError(
      `simulate only talks to a loopback address or the configured server ($IDEMGATE_URL); refusing ${parsed.origin}`,
    );
  }
  return parsed.origin;
}
