/**
 * A separate process for the embedded database's lock tests:
 *   node --import tsx test/support/lock-holder.ts <lock|database> <dataDir> [startAtMs]
 * prints {"readyAtMs":…} once loaded, waits until startAtMs (so several processes try at the same
 * moment), then takes the data directory's lock (`lock`) or opens the embedded database (`database`),
 * and prints a second JSON line: {"won":true,"pid":…} or {"won":false,"error":"<name>","message":"…"}.
 * A winner holds on until its stdin ends, then closes and exits 0.
 */
import { openDatabase } from "../../lib/db/database";
import { acquireDataDirLock } from "../../lib/db/lock";

const [mode, dataDir, startAt] = process.argv.slice(2);
if ((mode !== "lock" && mode !== "database") || !dataDir) {
  console.error("usage: lock-holder.ts <lock|database> <dataDir> [startAtMs]");
  process.exit(2);
}

console.log(JSON.stringify({ readyAtMs: Date.now() }));
const wait = Number(startAt ?? 0) - Date.now();
if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));

let close: () => Promise<void>;
try {
  if (mode === "lock") {
    const lock = await acquireDataDirLock(dataDir);
    close = () => lock.release();
  } else {
    const db = await openDatabase({ dataDir, migrate: false });
    close = () => db.close();
  }
} catch (err) {
  const e = err as Error;
  console.log(JSON.stringify({ won: false, error: e.name, message: e.message }));
  process.exit(1);
}
console.log(JSON.stringify({ won: true, pid: process.pid }));
process.stdin.resume();
process.stdin.on("end", () => {
  void close().then(() => process.exit(0));
});
