import { testPort } from "@/scripts/test-ports.mjs";
import { IdemgateClient, type HeldCall } from "@/lib/client/index";
import { bundledScript } from "@/test/support/bundled-script";
import { describeProbeFaultRun, effects } from "@/test/support/probe-fault-run";

// Held calls of a client-run tool resolved where the tool lives, by the TypeScript client: guarded
// functions run through lib/client's guard() in worker processes (test/support/guard-worker.ts), and
// the resolver (client.startResolver) runs in this process, which survives every fault. The run, its
// faults and its checks: test/support/probe-fault-run.ts. Ports 3188, 3189, 6388 and 5488 are this
// file's (moved by IDEMGATE_TEST_PORT_BASE).

/** the probe the application registers: it asks the counting service whether the call's effect happened */
function ledgerProbe(dir: string) {
  return async (call: HeldCall) => {
    const counted = await effects(dir, call.key);
    if (counted > 0) return { applied: true as const, result: { by: "probe", effects: counted } };
    // nothing yet, and the call may still be running: cannot tell
    return call.leaseEnded ? { applied: false as const } : null;
  };
}

describeProbeFaultRun({
  title: "held calls of TypeScript guarded functions resolved by a probe",
  slug: "probes",
  worker: { command: process.execPath, args: [await bundledScript("test/support/guard-worker.ts")], env: { FLUSH_ON_EXIT_MS: "3000" } },
  ports: { embedded: testPort(3188), servers: testPort(3189), redis: testPort(6388), postgresProxy: testPort(5488) },
  resolvers: [
    {
      name: "TypeScript",
      holder: "survivor-ts",
      async start({ url, token, ledgerDir }) {
        const client = new IdemgateClient({ baseUrl: url, token, replayCache: false, retry: { maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 1_000 } });
        const resolver = client.startResolver({ "ledger.record": ledgerProbe(ledgerDir) }, { holder: "survivor-ts", intervalMs: 500, probeTimeoutMs: 2_000, onError: () => {} });
        return { stop: async () => (await resolver.stop(), {}) };
      },
    },
  ],
});
