import { Command } from "commander";
import { seedIfEmpty } from "@/lib/process/seed";
import { withRuntime } from "../with-runtime";

export function seedCommand(): Command {
  return new Command("seed").description("on an empty database: create the demo operator and API token, and print them once").action(async () => {
    const out = await withRuntime((rt) => seedIfEmpty(rt));
    if (out.created) process.stdout.write(out.credentials ?? "");
    else console.log("Already seeded: an operator exists. Create more with `idemgate operator create` and `idemgate token create`.");
  });
}
