import { describeKeyStoreContract } from "@/test/support/key-store-contract";
import { MemoryKeyStore } from "./memory-key-store";

describeKeyStoreContract("memory", async () => {
  const store = new MemoryKeyStore();
  return { store, cleanup: () => store.close() };
});
