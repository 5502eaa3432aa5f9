import net from "node:net";

// The e2e and fault suites' fixed resources, moved together by one variable so that two checkouts
// can run them side by side on one machine: IDEMGATE_TEST_PORT_BASE=4100 shifts every port these
// suites use by +1000 (3123 → 4123, 4311 → 5311, 6391 → 7391, …), and names the e2e database
// `idemgate_e2e_4100` and the e2e Redis prefix `idg-e2e-4100`. Unset (or 3100), today's values.
// Pick bases at least 100 apart for checkouts that run at the same time.
export const DEFAULT_PORT_BASE = 3100;

function readBase() {
  const raw = process.env.IDEMGATE_TEST_PORT_BASE;
  if (raw === undefined || raw === "") return DEFAULT_PORT_BASE;
  const base = Number(raw);
  if (!Number.isInteger(base) || base < 1100 || base > 58_000) {
    throw new Error(`IDEMGATE_TEST_PORT_BASE must be an integer between 1100 and 58000, not ${JSON.stringify(raw)}`);
  }
  return base;
}

export const PORT_BASE = readBase();

/** The port a suite names by its default value (e.g. 3131), moved by IDEMGATE_TEST_PORT_BASE. */
export function testPort(defaultPort) {
  return defaultPort - DEFAULT_PORT_BASE + PORT_BASE;
}

/** "" by default, else `_<base>` / `-<base>`: appended to the e2e database name and Redis prefix. */
export const DATABASE_SUFFIX = PORT_BASE === DEFAULT_PORT_BASE ? "" : `_${PORT_BASE}`;
export const PREFIX_SUFFIX = PORT_BASE === DEFAULT_PORT_BASE ? "" : `-${PORT_BASE}`;

/** true when something accepts connections on the loopback port */
export function listening(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}
