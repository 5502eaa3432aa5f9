// Preload into a server to profile a chosen stretch of it, start-up left out:
//   PROFILE_OUT=/tmp/replay.cpuprofile node --import ./bench/profile-hook.mjs scripts/serve.mjs -p 3141
// The first SIGUSR2 starts V8's CPU profiler (inspector `Profiler` domain, 200 µs sampling) and
// notes process.cpuUsage(); the second stops it and writes PROFILE_OUT, and PROFILE_OUT + ".cpu"
// with the user and system CPU (µs) spent in between. Summaries: bench/cpuprofile-summary.mjs
// (functions) and bench/cpuprofile-costs.mjs (the gateway's costs per request).
import { writeFileSync } from "node:fs";
import inspector from "node:inspector";

const out = process.env.PROFILE_OUT ?? "server.cpuprofile";
const session = new inspector.Session();
session.connect();
const post = (method, params = {}) => new Promise((resolve, reject) => session.post(method, params, (err, res) => (err ? reject(err) : resolve(res))));

let cpuAtStart = null;
process.on("SIGUSR2", async () => {
  if (cpuAtStart === null) {
    cpuAtStart = process.cpuUsage();
    await post("Profiler.enable");
    await post("Profiler.setSamplingInterval", { interval: 200 });
    await post("Profiler.start");
    return;
  }
  const cpu = process.cpuUsage(cpuAtStart);
  cpuAtStart = null;
  const { profile } = await post("Profiler.stop");
  writeFileSync(out, JSON.stringify(profile));
  writeFileSync(`${out}.cpu`, JSON.stringify(cpu));
  console.error(`profile written to ${out}`);
});
