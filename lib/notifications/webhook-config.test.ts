import { describe, expect, it } from "vitest";
import { ConfigFileError, parseToolConfig, type ConfigProblem } from "@/lib/tools/config-file";
import { endpointView } from "./endpoints";
import { backoffMs } from "./webhook-config";

const SECRET = "whsec_0123456789abcdef";
const ENV = { OPS_HOOK_SECRET: SECRET, SLACK_HOOK_PATH: "T000/B000/XXXXSECRET" };

function problemsOf(text: string, env: Record<string, string> = ENV): ConfigProblem[] {
  try {
    parseToolConfig(text, "idemgate.config.yaml", env);
  } catch (err) {
    if (err instanceof ConfigFileError) return err.problems;
    throw err;
  }
  throw new Error("the file was accepted");
}

describe("webhooks: in the configuration file", () => {
  it("reads endpoints with their defaults, the secret from the environment", () => {
    const config = parseToolConfig(
      `
webhooks:
  - name: ops
    url: https://hooks.example.com/idemgate
    secret: \${OPS_HOOK_SECRET}
  - name: slack
    url: https://hooks.slack.com/services/\${SLACK_HOOK_PATH}
    secret: \${OPS_HOOK_SECRET}
    format: slack
    events: [key.unknown, key.stuck]
    retryBackoffMs: 1000
`,
      "idemgate.config.yaml",
      ENV,
    );
    expect(config.webhooks).toHaveLength(2);
    expect(config.webhooks[0]).toMatchObject({ name: "ops", secret: SECRET, format: "idemgate", events: ["key.unknown", "key.stuck", "anomaly.opened", "tool.paused", "tool.resumed"], maxAttempts: 10, retryBackoffMs: 5000, timeoutMs: 10000 });
    expect(config.webhooks[1]).toMatchObject({ format: "slack", events: ["key.unknown", "key.stuck"], url: "https://hooks.slack.com/services/T000/B000/XXXXSECRET" });
    // what the console shows: neither the secret nor the part of the URL from the environment
    const shown = JSON.stringify(config.webhooks.map(endpointView));
    expect(shown).not.toContain(SECRET);
    expect(shown).not.toContain("XXXXSECRET");
    expect(endpointView(config.webhooks[1]).url).toBe("https://hooks.slack.com/services/${SLACK_HOOK_PATH: ••••••}");
  });

  it("refuses a bad endpoint, naming the field", () => {
    const hook = (fields: string) => `webhooks:\n  - { name: ops, url: "https://h.example/x", secret: "\${OPS_HOOK_SECRET}", ${fields} }\n`;
    expect(problemsOf(hook("events: [key.gone]"))).toEqual([expect.objectContaining({ path: "webhooks[0].events[0]" })]);
    expect(problemsOf(hook("format: teams"))).toEqual([expect.objectContaining({ path: "webhooks[0].format" })]);
    expect(problemsOf(hook("retryBackoffMs: -1"))).toEqual([expect.objectContaining({ path: "webhooks[0].retryBackoffMs" })]);
    expect(problemsOf(hook("headers: { a: b }"))).toEqual([{ path: "webhooks[0].headers", message: "is not a field of this declaration" }]);
    expect(problemsOf(`webhooks:\n  - { name: ops, url: "ftp://h.example/x", secret: "\${OPS_HOOK_SECRET}" }\n`)).toEqual([expect.objectContaining({ path: "webhooks[0].url" })]);
    expect(problemsOf(`webhooks:\n  - { name: ops, url: "https://h.example/x" }\n`)).toEqual([expect.objectContaining({ path: "webhooks[0].secret" })]);
  });

  it("refuses a secret written into the file, a short one, an unset variable, and a name used twice", () => {
    expect(problemsOf(`webhooks:\n  - { name: ops, url: "https://h.example/x", secret: "written-into-the-file-0123" }\n`)).toEqual([
      { path: "webhooks[0].secret", message: "must come from the environment (secret: ${NAME}), not be written into the file" },
    ]);
    expect(problemsOf(`webhooks:\n  - { name: ops, url: "https://h.example/x", secret: "\${SHORT}" }\n`, { SHORT: "abc" })).toEqual([expect.objectContaining({ path: "webhooks[0].secret", message: "must be at least 16 characters" })]);
    expect(problemsOf(`webhooks:\n  - { name: ops, url: "https://h.example/x", secret: "\${NOT_SET}" }\n`)).toEqual([
      { path: "webhooks[0].secret", message: "the environment variable NOT_SET is not set" },
    ]);
    const twice = `webhooks:\n  - { name: ops, url: "https://a.example/x", secret: "\${OPS_HOOK_SECRET}" }\n  - { name: ops, url: "https://b.example/x", secret: "\${OPS_HOOK_SECRET}" }\n`;
    expect(problemsOf(twice)).toEqual([{ path: "webhooks[1].name", message: "ops is declared twice (also webhooks[0])" }]);
  });

  it("backs off exponentially, at most an hour", () => {
    const none = () => 0;
    expect([1, 2, 3, 4].map((n) => backoffMs({ retryBackoffMs: 1000 }, n, none))).toEqual([1000, 2000, 4000, 8000]);
    expect(backoffMs({ retryBackoffMs: 1000 }, 30, none)).toBe(3_600_000);
    expect(backoffMs({ retryBackoffMs: 1000 }, 1, () => 1)).toBe(1100);
  });
});
