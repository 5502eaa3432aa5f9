import { describe, expect, it } from "vitest";
import { findGuide, GUIDES, guideHref, headingId, readGuide } from "./guides";

describe("user guides", () => {
  it("maps links between guides to console pages and leaves other files as text", () => {
    expect(guideHref("operate.md#backups")).toBe("/docs/operate#backups");
    expect(guideHref("./concepts.md")).toBe("/docs/concepts");
    expect(guideHref("benchmarks.md")).toBeNull();
    expect(guideHref("../README.md#configuration")).toBeNull();
    expect(guideHref("https://example.com/x.md")).toBe("https://example.com/x.md");
    expect(guideHref("#key-states")).toBe("#key-states");
    expect(findGuide("../README")).toBeNull();
  });

  it("names headings as GitHub does", () => {
    expect(headingId("What each audit mode can lose")).toBe("what-each-audit-mode-can-lose");
    expect(headingId("Redis (or Redis Cluster)")).toBe("redis-or-redis-cluster");
    expect(headingId("`Prefer: wait` and retries")).toBe("prefer-wait-and-retries");
  });

  // A link to a section that was renamed would land at the top of the page without a word.
  it("every link from one guide to another lands on a heading that exists", async () => {
    const sources = new Map<string, string>();
    for (const guide of GUIDES) sources.set(guide.slug, await readGuide(guide.slug));
    const anchors = new Map([...sources].map(([slug, md]) => [slug, new Set([...md.matchAll(/^#{1,4} (.+)$/gm)].map((m) => headingId(m[1])))]));
    const links: string[] = [];
    for (const [slug, md] of sources) {
      for (const [, href] of md.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = href.startsWith("#") ? `/docs/${slug}${href}` : guideHref(href);
        if (!target?.startsWith("/docs/")) continue;
        links.push(`${slug} → ${href}`);
        const [page, anchor] = target.slice("/docs/".length).split("#");
        expect(anchors.has(page), `${slug}: ${href}`).toBe(true);
        if (anchor) expect(anchors.get(page)!.has(anchor), `${slug}: ${href}`).toBe(true);
      }
    }
    expect(links.length).toBeGreaterThan(3);
  });
});
