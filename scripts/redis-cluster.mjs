// A local Redis Cluster of 3 masters (no replicas) on loopback ports, for tests and trying things
// out. Each node is `redis-server` in cluster mode, in a temporary directory of its own, without
// persistence.
//
//   node scripts/redis-cluster.mjs start [port port port]   default 7101 7102 7103; prints REDIS_CLUSTER_NODES=...
//   node scripts/redis-cluster.mjs stop [first port]        stops the cluster `start` left running
//
// Tests import startRedisCluster() instead: the nodes are then child processes of the test, and
// stop() (or the test process exiting) ends them. Anything that goes wrong while starting throws,
// with the node's own output: a missing redis-server fails loudly, it never skips.
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Redis } from "ioredis";
import { listening } from "./test-ports.mjs";

export const DEFAULT_PORTS = [7101, 7102, 7103];
const HOST = "127.0.0.1";
/** Redis Cluster's bus port is the client port + 10000. */
const BUS_OFFSET = 10_000;

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** true when this process can bind the port on loopback right now */
function bindable(port) {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen({ host: HOST, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

async function portFree(port) {
  return !(await listening(port)) && (await bindable(port)) && !(await listening(port + BUS_OFFSET)) && (await bindable(port + BUS_OFFSET));
}

/**
 * `count` ports from `from` upwards whose client and bus ports are both free (tests use this so
 * that two test runs on one machine, or a leftover cluster, do not collide).
 */
export async function findFreePorts(count = 3, from = DEFAULT_PORTS[0], to = from + 98) {
  const ports = [];
  for (let port = from; port <= to && ports.length < count; port++) {
    if (await portFree(port)) ports.push(port);
  }
  if (ports.length < count) throw new Error(`redis-cluster: found only ${ports.length} free ports (and bus ports +${BUS_OFFSET}) in ${from}-${to}`);
  return ports;
}

function run(file, args, timeoutMs = 30_000) {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) {
        err.message = `${file} ${args.join(" ")} failed: ${err.message}\n${stdout}\n${stderr}`;
        reject(err);
      } else {
        resolve(stdout);
      }
    });
  });
}

async function clusterInfo(port) {
  const redis = new Redis({ host: HOST, port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 2_000 });
  redis.on("error", () => {});
  try {
    await redis.connect();
    const text = await redis.cluster("INFO");
    return Object.fromEntries(
      String(text)
        .split(/\r?\n/)
        .filter((line) => line.includes(":"))
        .map((line) => line.split(":")),
    );
  } finally {
    redis.disconnect();
  }
}

async function waitFor(what, check, timeoutMs) {
  const until = Date.now() + timeoutMs;
  let last = null;
  for (;;) {
    try {
      if (await check()) return;
    } catch (err) {
      if (err.fatal) throw err;
      last = err;
    }
    if (Date.now() > until) throw new Error(`redis-cluster: timed out waiting for ${what}${last ? ` (${last.message})` : ""}`);
    await sleep(100);
  }
}

/** Ends the node processes (TERM, then KILL after a grace period) and removes their directory. */
async function stopNodes(nodes, dir) {
  await Promise.all(
    nodes.map(async (node) => {
      const { child } = node;
      if (!child || child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      const done = await Promise.race([exited.then(() => true), sleep(5_000).then(() => false)]);
      if (!done) {
        child.kill("SIGKILL");
        await exited;
      }
    }),
  );
  await rm(dir, { recursive: true, force: true });
}

/**
 * Starts `redis-server` in cluster mode on each port, joins them into one cluster (all 16384 slots
 * spread over the masters) and waits until every node says cluster_state:ok.
 *
 * detached: false (tests) — the nodes are children of this process; stop() ends them, and so does
 * this process exiting. detached: true (the CLI) — they outlive it; `stop` ends them by pid.
 * Returns { nodes: [{host, port}], ports, dir, pids, seeds: "host:port,...", stop() }.
 */
export async function startRedisCluster({ ports = DEFAULT_PORTS, detached = false, redisServer = "redis-server", redisCli = "redis-cli" } = {}) {
  if (ports.length < 3) throw new Error("redis-cluster: a cluster needs at least 3 masters");
  for (const port of ports) {
    if (!(await portFree(port))) {
      throw new Error(`redis-cluster: port ${port} or ${port + BUS_OFFSET} is in use (a leftover cluster? node scripts/redis-cluster.mjs stop ${ports[0]})`);
    }
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-redis-cluster-"));
  const nodes = ports.map((port) => ({ host: HOST, port, dir: path.join(dir, String(port)), child: null, output: "" }));
  let stopped = false;
  const onExit = () => {
    // last resort when the test process ends without stop(): kill the children synchronously
    for (const node of nodes) if (node.child && node.child.exitCode === null) node.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    if (!detached) process.removeListener("exit", onExit);
    await stopNodes(nodes, dir);
  };
  if (!detached) process.once("exit", onExit);

  try {
    for (const node of nodes) {
      mkdirSync(node.dir, { recursive: true });
      const args = [
        "--port", String(node.port),
        "--bind", HOST,
        "--cluster-enabled", "yes",
        "--cluster-config-file", path.join(node.dir, `nodes-${node.port}.conf`),
        "--cluster-node-timeout", "5000",
        "--dir", node.dir,
        "--save", "",
        "--appendonly", "no",
        "--daemonize", "no",
      ];
      const log = detached ? openSync(path.join(node.dir, "redis.log"), "a") : "pipe";
      const child = spawn(redisServer, args, { stdio: ["ignore", log, log], detached });
      node.child = child;
      if (!detached) {
        const keep = (chunk) => (node.output = (node.output + chunk).slice(-4_000));
        child.stdout.on("data", keep);
        child.stderr.on("data", keep);
      }
      await new Promise((resolve, reject) => {
        child.once("spawn", resolve);
        child.once("error", (err) => reject(new Error(`redis-cluster: cannot start ${redisServer} (${err.message}); is Redis installed?`)));
      });
      child.once("exit", (code, signal) => {
        if (!stopped) node.output += `\n[${redisServer} on port ${node.port} exited: ${signal ?? code}]`;
      });
      if (detached) child.unref();
    }

    const exitedEarly = () => nodes.find((n) => n.child.exitCode !== null || n.child.signalCode !== null);
    const outputOf = (node) => (detached ? readLog(node) : node.output);
    await waitFor(
      "the nodes to accept connections",
      async () => {
        const dead = exitedEarly();
        if (dead) throw Object.assign(new Error(`redis-server on port ${dead.port} exited`), { fatal: true });
        return (await Promise.all(nodes.map((n) => listening(n.port)))).every(Boolean);
      },
      15_000,
    ).catch(async (err) => {
      const dead = exitedEarly();
      if (!dead) throw err;
      await sleep(100); // let the pipes deliver the node's last words
      throw new Error(`redis-cluster: redis-server on port ${dead.port} did not start:\n${outputOf(dead)}`);
    });

    await run(redisCli, ["--cluster", "create", ...nodes.map((n) => `${n.host}:${n.port}`), "--cluster-replicas", "0", "--cluster-yes"]);

    await waitFor(
      "cluster_state:ok on every node",
      async () => {
        const infos = await Promise.all(nodes.map((n) => clusterInfo(n.port)));
        return infos.every(
          (info) => info.cluster_state === "ok" && Number(info.cluster_slots_ok) === 16384 && Number(info.cluster_known_nodes) === nodes.length,
        );
      },
      30_000,
    );
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }

  return {
    nodes: nodes.map(({ host, port }) => ({ host, port })),
    ports: [...ports],
    dir,
    pids: nodes.map((n) => n.child.pid),
    seeds: nodes.map((n) => `${n.host}:${n.port}`).join(","),
    stop,
  };
}

function readLog(node) {
  try {
    return readFileSync(path.join(node.dir, "redis.log"), "utf8").slice(-4_000);
  } catch {
    return "(no log)";
  }
}

// ---- CLI --------------------------------------------------------------------------------------

function stateFile(firstPort) {
  return path.join(os.tmpdir(), `idemgate-redis-cluster-${firstPort}.json`);
}

/** the pid still runs redis-server (not a process that reused the pid) */
function isRedisServer(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("redis-server");
  } catch {
    try {
      process.kill(pid, 0);
      return true; // no /proc (macOS): the pid is alive, trust the state file
    } catch {
      return false;
    }
  }
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function cliStart(args) {
  const ports = args.length > 0 ? args.map(Number) : DEFAULT_PORTS;
  if (ports.some((p) => !Number.isInteger(p) || p < 1 || p > 55535)) throw new Error(`redis-cluster: bad ports ${args.join(" ")}`);
  const file = stateFile(ports[0]);
  if (existsSync(file)) throw new Error(`redis-cluster: ${file} exists: a cluster on ${ports[0]} is running (stop it first)`);
  const cluster = await startRedisCluster({ ports, detached: true });
  writeFileSync(file, JSON.stringify({ ports: cluster.ports, pids: cluster.pids, dir: cluster.dir }, null, 2));
  console.log(`Redis Cluster up: 3 masters, logs and node files in ${cluster.dir}`);
  console.log(`REDIS_CLUSTER_NODES=${cluster.seeds}`);
}

async function cliStop(args) {
  const firstPort = args.length > 0 ? Number(args[0]) : DEFAULT_PORTS[0];
  const file = stateFile(firstPort);
  if (!existsSync(file)) {
    console.log(`redis-cluster: no cluster started on ${firstPort} (${file} is missing)`);
    return;
  }
  const state = JSON.parse(await readFile(file, "utf8"));
  for (const pid of state.pids) if (alive(pid) && isRedisServer(pid)) process.kill(pid, "SIGTERM");
  const until = Date.now() + 5_000;
  while (state.pids.some(alive) && Date.now() < until) await sleep(100);
  for (const pid of state.pids) if (alive(pid) && isRedisServer(pid)) process.kill(pid, "SIGKILL");
  await rm(state.dir, { recursive: true, force: true });
  await rm(file, { force: true });
  console.log(`Redis Cluster on ${state.ports.join(", ")} stopped`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [command, ...args] = process.argv.slice(2);
  const commands = { start: cliStart, stop: cliStop };
  if (!commands[command]) {
    console.error("usage: node scripts/redis-cluster.mjs start [port port port] | stop [first port]");
    process.exit(2);
  }
  commands[command](args).catch((err) => {
    console.error(err.message);
    process.exit(1);
  });
}
