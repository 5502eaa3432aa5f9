import { Command } from "commander";
import { RedisKeyStore } from "@/lib/store/redis/redis-key-store";
import { withRuntime } from "../with-runtime";

/**
 * `idemgate store rebuild-indexes`: after upgrading from a version that kept Redis records as hashes
 * with seven index entries each, and whenever an index is in doubt.
 * Stop the gateways first: until it is done, lists miss records, and calls on a record still in
 * the old encoding fail (503) rather than guess.
 */
export function storeCommand(): Command {
  const store = new Command("store").description("key store maintenance");
  store
    .command("rebuild-indexes")
    .description(
      "Redis key store: rewrite records kept in an earlier encoding and rebuild every index from the records " +
        "(REDIS_URL or REDIS_CLUSTER_NODES, IDEMGATE_REDIS_PREFIX). Run with the gateways stopped; running it again changes nothing",
    )
    .action(async () => {
      const out = await withRuntime(async (rt) => {
        if (!(rt.store instanceof RedisKeyStore)) return null;
        return rt.store.rebuildIndexes();
      });
      if (out === null) {
        console.log("The key store is not Redis (set REDIS_URL or REDIS_CLUSTER_NODES): its indexes are the database's, nothing to rebuild.");
        return;
      }
      console.log(`Rebuilt the indexes of ${out.records} record${out.records === 1 ? "" : "s"} (${out.rewritten} rewritten from the earlier encoding; ${out.droppedIndexes} index keys dropped first).`);
    });
  return store;
}
