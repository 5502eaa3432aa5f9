import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { signatureHeader } from "./signature";

// docs/operate.md § Verifying a delivery shows receivers a verifier of their own: it must accept
// what Idemgate sends and refuse what it does not.
describe("the verifier in docs/operate.md", () => {
  it("accepts Idemgate's signature and refuses a bad one, an old one and another body", async () => {
    const doc = await readFile(path.resolve(import.meta.dirname, "../../docs/operate.md"), "utf8");
    const code = /### Verifying a delivery[\s\S]*?```js\n([\s\S]*?)```/.exec(doc)?.[1];
    expect(code).toBeTruthy();
    const dir = await mkdtemp(path.join(os.tmpdir(), "idemgate-verify-"));
    try {
      await writeFile(path.join(dir, "verify.mjs"), code!);
      const { verify } = (await import(path.join(dir, "verify.mjs"))) as { verify: (h: string | undefined, b: string, s: string) => boolean };
      const secret = "whsec_0123456789abcdef";
      const body = JSON.stringify({ id: "evt_1", type: "key.stuck" });
      const header = signatureHeader(secret, body);
      expect(verify(header, body, secret)).toBe(true);
      expect(verify(header, body + " ", secret)).toBe(false);
      expect(verify(header, body, "whsec_another_secret_0")).toBe(false);
      expect(verify(header.replace(/v1=[0-9a-f]+/, `v1=${"0".repeat(64)}`), body, secret)).toBe(false);
      expect(verify(signatureHeader(secret, body, Date.now() - 600_000), body, secret)).toBe(false);
      expect(verify(undefined, body, secret)).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
