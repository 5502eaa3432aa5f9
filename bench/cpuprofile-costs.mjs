// The gateway's costs in a V8 CPU profile of the server (bench/profile-hook.mjs): every sample goes
// to one group, named by the nearest frame from the leaf up that a rule matches; shares are of the
// busy samples without the kernel send (`writev`: on a shared machine a sample in a system call
// also holds the time the process waited to run), and µs per request = share × the user CPU per
// request when the ".cpu" file and the request count are given.
//   node bench/cpuprofile-costs.mjs <file.cpuprofile> [requests]
import { existsSync, readFileSync } from "node:fs";

const [file, requestsArg] = process.argv.slice(2);
if (!file) {
  console.error("usage: node bench/cpuprofile-costs.mjs <file.cpuprofile> [requests]");
  process.exit(1);
}
const profile = JSON.parse(readFileSync(file, "utf8"));
const requests = Number(requestsArg);
const cpu = existsSync(`${file}.cpu`) ? JSON.parse(readFileSync(`${file}.cpu`, "utf8")) : null;

const RULES = [
  ["(left out) idle", /^\(idle\) /],
  ["(left out) the profiler itself", /profile-hook\.mjs|profhook\.mjs|^post node:inspector/],
  ["(left out) kernel send", /^writev |^writevGeneric /],
  ["GC", /^\(garbage collector\) /],
  ["V8 (program)", /^\(program\) /],
  ["response writing (JavaScript)", /^(writeAnswer|writeHead|_storeHeader|processHeader|checkInvalidHeaderChar) |^end node:_http_outgoing/],
  ["async hooks (AsyncLocalStorage)", /^(promiseInitHook|promiseBeforeHook|promiseAfterHook|promiseResolveHook|_propagate|lookupPublicResource|emitInitNative|emitInitScript|emitBeforeScript|emitAfterScript|emitPromiseResolveNative|executionAsyncResource) /],
  ["token check", /^(tokenPrincipal|knownPrincipal|authenticateToken|cachedPrincipal|hashToken|bearerToken) /],
  ["fingerprint", /^(fingerprint|canonicalJson|canonicalize|nestsDeeperThan) /],
  ["validation (zod)", /^parseArgs /],
  ["body read and parse", /^(json|parseJsonBytes|checkJsonHeaders|scanJson|readAtMost|completeBody|bodyConsumed|drain) /],
  ["request headers", /^(nodeHeaders|setForwardedProto|_addHeaderLine|_addHeaderLineDistinct|matchKnownFields) |^get node:_http_incoming/],
  ["invokeTool, runner", /^(invokeTool|idempotencyKeyHeader|sessionHeader|keySourceHeader|preferredWaitSeconds|resultAnswer|problemAnswer|runnerFor) /],
  ["engine: replay answer and suppression", /^(suppressed|suppression|recordCall|remember) /],
  ["audit batch (JavaScript)", /^(flush|writeBatch) .*chunks/],
  ["Prisma", /@prisma|^wasm-function/],
  ["pg driver", /node_modules\/pg/],
  ["Redis (ioredis)", /ioredis|redis-parser|standard-as-callback/],
  ["engine: other", /^(invoke|admit|begin|execute|run|complete|intent|outcome) .*chunks/],
  ["fast path (routing, serve)", /^(serve|handleInvoke) /],
  ["Node's HTTP server", /^(parserOnHeadersComplete|parserOnIncoming|parserOnBody|parserOnMessageComplete|socketOnData|onParserExecute|resOnFinish|onFinish) |^Socket\._writeGeneric /],
];

const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
const self = new Map();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const label = (n) => `${n.callFrame.functionName || "(anonymous)"} ${n.callFrame.url}`;

const groups = new Map();
for (const [id, us] of self) {
  let group = "other";
  find: for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
    const name = label(nodes.get(cur));
    for (const [g, re] of RULES) {
      if (re.test(name)) {
        group = g;
        break find;
      }
    }
  }
  groups.set(group, (groups.get(group) ?? 0) + us);
}
const counted = [...groups].filter(([g]) => !g.startsWith("(left out)"));
const total = counted.reduce((sum, [, us]) => sum + us, 0);
const userPerRequest = cpu && requests > 0 ? cpu.user / requests : null;
console.log(`${file}: ${(total / 1e6).toFixed(2)} s counted${userPerRequest ? `, user CPU ${userPerRequest.toFixed(1)} µs and system ${(cpu.system / requests).toFixed(1)} µs per request` : ""}`);
for (const [g, us] of counted.sort((a, b) => b[1] - a[1])) {
  const share = us / total;
  console.log(`${(100 * share).toFixed(1).padStart(5)} %${userPerRequest ? `  ${(share * userPerRequest).toFixed(1).padStart(6)} µs` : ""}  ${g}`);
}
