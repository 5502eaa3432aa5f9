// `npm start`: build if the sources changed since the last build, then serve on $PORT (default 3000)
// at $HOST (default: every interface; scripts/serve.mjs reads it).
import path from "node:path";
import { buildIfStale, ROOT, run } from "./build-if-stale.mjs";

const env = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };
const port = process.env.PORT?.trim() || "3000";

await buildIfStale(env);
process.exit(await run(process.execPath, [path.join(ROOT, "scripts", "serve.mjs"), "-p", port], { env }));
