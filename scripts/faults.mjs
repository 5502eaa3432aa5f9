// `npm run test:faults`: build if stale, then the fault suite (real servers, killed processes).
import path from "node:path";
import { buildIfStale, ROOT, run } from "./build-if-stale.mjs";

const env = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };
await buildIfStale(env);
const vitest = path.join(ROOT, "node_modules", "vitest", "vitest.mjs");
process.exit(await run(process.execPath, [vitest, "run", "--config", "vitest.faults.config.ts", ...process.argv.slice(2)], { env }));
