// The e2e server configurations (e2e/environments.json holds today's defaults), with their ports,
// database name and Redis prefix moved by IDEMGATE_TEST_PORT_BASE (scripts/test-ports.mjs).
import defaults from "./environments.json" with { type: "json" };
import { DATABASE_SUFFIX, PREFIX_SUFFIX, testPort } from "../scripts/test-ports.mjs";

function withDatabase(url, suffix) {
  const u = new URL(url);
  u.pathname = u.pathname + suffix;
  return u.toString();
}

const { embedded, servers, redisDown } = defaults;

export const environments = {
  embedded: { ...embedded, port: testPort(embedded.port) },
  servers: {
    ...servers,
    port: testPort(servers.port),
    redisPrefix: servers.redisPrefix + PREFIX_SUFFIX,
    databaseUrl: withDatabase(servers.databaseUrl, DATABASE_SUFFIX),
  },
  // its REDIS_URL is a closed port (1) on purpose: nothing to move
  redisDown: { ...redisDown, port: testPort(redisDown.port) },
};

/** the e2e PostgreSQL database's name, `idemgate_e2e` by default */
export const E2E_DATABASE = new URL(environments.servers.databaseUrl).pathname.slice(1);

export default environments;
