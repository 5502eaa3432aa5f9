import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { setWebhookEndpoints, webhookEndpoints } from "@/lib/notifications/endpoints";
import { ServedTools } from "./served-tools";

const hook = (name: string) => `  - { name: ${name}, url: "https://hooks.example.com/${name}", secret: "\${HOOK_SECRET}" }\n`;

describe("webhook endpoints of the configuration file", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "idemgate-hooks-"));
  const file = path.join(dir, "idemgate.config.yaml");
  afterAll(() => {
    setWebhookEndpoints([]);
    rmSync(dir, { recursive: true, force: true });
  });

  it("are served from the start, replaced by a reload, and kept when the new file is refused", async () => {
    writeFileSync(file, `webhooks:\n${hook("ops")}`);
    const lines: string[] = [];
    const served = new ServedTools({ builtIn: [], file, env: { HOOK_SECRET: "whsec_0123456789abcdef" }, envMcpServers: [], log: (l) => lines.push(l) });
    await served.start({ registry: null as never });
    expect(webhookEndpoints().map((e) => e.name)).toEqual(["ops"]);

    writeFileSync(file, `webhooks:\n${hook("ops")}${hook("oncall")}`);
    expect(await served.reload()).toEqual({ ok: true });
    expect(webhookEndpoints().map((e) => e.name)).toEqual(["ops", "oncall"]);

    writeFileSync(file, `webhooks:\n${hook("ops")}  - { name: oncall, url: "https://hooks.example.com/x", secret: "written-in-the-file-0000" }\n`);
    const refused = await served.reload();
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.message).toContain("webhooks[1].secret: must come from the environment");
    expect(webhookEndpoints().map((e) => e.name)).toEqual(["ops", "oncall"]);
    // the refusal quotes no secret
    expect(lines.join("\n")).not.toContain("whsec_0123456789abcdef");
    await served.close();
  });
});
