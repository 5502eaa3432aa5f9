// `npm start`: build if the sources changed since the last build, then serve on $PORT (default 3000)
// at $HOST (default: every interface; scripts/serve.mjs reads it). The tools of a configuration
// file are served too: the one IDEMGATE_CONFIG names, else idemgate.config.yaml in the working
// directory when there is one. SIGHUP is passed on to the server, which reloads that file.
import { existsSync } from "node:fs";
import path from "node:path";
import { buildIfStale, ROOT, run } from "./build-if-stale.mjs";

const env = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };
const port = process.env.PORT?.trim() || "3000";

const DEFAULT_CONFIG = "idemgate.config.yaml";
const configFile = env.IDEMGATE_CONFIG?.trim() || (existsSync(DEFAULT_CONFIG) ? DEFAULT_CONFIG : "");
// the server runs in the project's folder: name the file from where npm start was asked
if (configFile) env.IDEMGATE_CONFIG = path.resolve(configFile);

await buildIfStale(env);
const signals = ["SIGINT", "SIGTERM", ...(configFile ? ["SIGHUP"] : [])];
process.exit(await run(process.execPath, [path.join(ROOT, "scripts", "serve.mjs"), "-p", port], { env, signals }));
