import { readFile } from "node:fs/promises";
import path from "node:path";

/** The user guides in docs/, in reading order; the console serves each at /docs/<slug>. */
export const GUIDES = [
  { slug: "concepts", title: "Concepts", summary: "Keys, key states, TTL, lease, fencing, fallback dedupe, advisory keys, and the two quiet failure modes." },
  { slug: "integrate", title: "Integrate", summary: "curl, the TypeScript client, MCP clients, and agent frameworks: the Vercel AI SDK, the OpenAI Agents SDK, LangChain.js." },
  { slug: "operate", title: "Operate", summary: "Redis and PostgreSQL in production, sizing, metrics and alerts, retention, backups, upgrades, the security model." },
] as const;

export type GuideSlug = (typeof GUIDES)[number]["slug"];

export function findGuide(slug: string): (typeof GUIDES)[number] | null {
  return GUIDES.find((guide) => guide.slug === slug) ?? null;
}

/** The Markdown of one guide, as the repository has it (next.config.ts copies docs/*.md into the build). */
export async function readGuide(slug: GuideSlug): Promise<string> {
  return readFile(/*turbopackIgnore: true*/ path.join(process.cwd(), "docs", `${slug}.md`), "utf8");
}

/**
 * Where a link inside a guide goes in the console: another guide (`operate.md#backups` →
 * `/docs/operate#backups`), the benchmark page and the README stay files of the repository (null:
 * shown as text), anything else is left as written.
 */
export function guideHref(href: string): string | null {
  const match = /^(?:\.\/)?([a-z-]+)\.md(#[\w-]*)?$/.exec(href);
  if (match) return findGuide(match[1]) ? `/docs/${match[1]}${match[2] ?? ""}` : null;
  if (/^(\.\.\/|\/)?[\w./-]+\.md(#[\w-]*)?$/.test(href)) return null;
  return href;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
export function headingId(text: string): string {
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}
