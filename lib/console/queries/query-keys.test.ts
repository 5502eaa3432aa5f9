import { describe, expect, it } from "vitest";
import { consoleKeys } from "./query-keys";

const startsWith = (key: readonly unknown[], prefix: readonly unknown[]) => prefix.every((part, i) => key[i] === part);

// A mutation refreshes a resource by its prefix: every key of the resource must begin with it.
describe("consoleKeys", () => {
  it("nests each key of the keys resource under keys.all", () => {
    for (const key of [consoleKeys.keys.list("state=stuck"), consoleKeys.keys.detail("s", "k"), consoleKeys.keys.now("s", "k"), consoleKeys.keys.held({ state: "stuck" }, 1)]) {
      expect(startsWith(key, consoleKeys.keys.all), JSON.stringify(key)).toBe(true);
    }
  });

  it("nests the anomaly lists under anomalies.lists, apart from the counts and one anomaly", () => {
    expect(startsWith(consoleKeys.anomalies.list("status=open"), consoleKeys.anomalies.lists)).toBe(true);
    for (const key of [consoleKeys.anomalies.counts, consoleKeys.anomalies.detail("a1")]) {
      expect(startsWith(key, consoleKeys.anomalies.all)).toBe(true);
      expect(startsWith(key, consoleKeys.anomalies.lists)).toBe(false);
    }
  });

  it("keeps a key's page and the anomaly page's view of a key apart: their data differ in shape", () => {
    expect(consoleKeys.keys.detail("s", "k")).not.toEqual(consoleKeys.keys.now("s", "k"));
  });

  it("gives each page's saved views a key of its own", () => {
    expect(consoleKeys.savedViews.page("keys")).not.toEqual(consoleKeys.savedViews.page("anomalies"));
  });
});
